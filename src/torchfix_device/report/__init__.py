"""What the user reads: findings, summaries, the patch, output formats, the migration report,
progress, terminal output.

Imports: :mod:`~torchfix_device.run` and the layers below it.
"""
