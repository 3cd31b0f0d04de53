"""What a value is: a tensor, a module, a project object, a tuple, a Python number; on which device;
whether it may require grad; whether it is 0-dim. Asked by every codemod.

Imports: :mod:`~torchfix_device.syntax`, :mod:`~torchfix_device.files`, :mod:`~torchfix_device.prefilter`
and the top-level vocabulary modules.
"""
