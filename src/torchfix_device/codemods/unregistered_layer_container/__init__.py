"""TFD004 unregistered-layer-container: the rule (:mod:`.rule`) and its own helpers (:mod:`.containers`).

The class is re-exported here, so ``python -m libcst.tool codemod unregistered_layer_container.UnregisteredLayerContainer`` finds it.
"""

from torchfix_device.codemods.unregistered_layer_container.rule import UnregisteredLayerContainer

__all__ = ["UnregisteredLayerContainer"]
