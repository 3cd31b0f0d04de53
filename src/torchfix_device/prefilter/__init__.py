"""Stage 1 of the engine: what CPython's ``ast`` tells about a file cheaply (names spelt, calls,
classes), so that codemods that cannot match are never run and statements without a site are
skipped.

Imports: the top-level vocabulary modules and :mod:`torchfix_device.syntax`.
"""
