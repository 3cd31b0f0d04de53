"""A run over files: one job per file (cache, budgets, the engine or the notebook support), the
process pool, interruptions, the result cache, stdin mode, ``--add-noqa``.

Imports: :mod:`~torchfix_device.engine` and the layers below it.
"""
