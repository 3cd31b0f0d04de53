"""TFD017 legacy-autograd-function: the rule (:mod:`.rule`) and its libcst rewrites (:mod:`.rewrite`).
What may be migrated is read with the stdlib ``ast`` by :mod:`torchfix_device.facts.legacy_functions`
(one file) and :mod:`torchfix_device.facts.legacy_function_run` (the run).

The class is re-exported here, so ``python -m libcst.tool codemod legacy_autograd_function.LegacyAutogradFunction`` finds it.
"""

from torchfix_device.codemods.legacy_autograd_function.rule import LegacyAutogradFunction

__all__ = ["LegacyAutogradFunction"]
