"""torchfix-device: make legacy PyTorch code device-correct and device-agnostic."""

__version__ = "0.1.0"
