"""The user's files: reading them byte-faithfully, writing them atomically, which files a run takes,
notebooks' JSON, the run lock, git safety, the output tree.

Imports: the top-level vocabulary modules and :mod:`torchfix_device.syntax`.
"""
