"""What the source says, read as trees and tokens: libcst and ``ast`` helpers, scopes and qualified names,
``# noqa`` comments, token fixes for code Python 3 cannot parse. Knows nothing of torch semantics.

Imports: the top-level vocabulary modules (``finding``, ``torch_api``, ...) only.
"""
