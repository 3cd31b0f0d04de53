"""The codemods: the base class an author writes against (:mod:`.base`), the registry (:mod:`.catalog`),
one module per rule (a package where the rule has helpers of its own), and :mod:`.common` for helpers
several rules share. Importing this package imports no rule (a warm run imports none).

Imports: :mod:`~torchfix_device.devices` and the layers below it.
"""
