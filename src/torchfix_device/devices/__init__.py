"""Where a rewrite gets its device (DESIGN.md, "Where a rewrite gets its device"): the module's own,
a guard's tensor, a user's flag, an existing binding, or one inserted once.

Imports: :mod:`~torchfix_device.facts` and the layers below it.
"""
