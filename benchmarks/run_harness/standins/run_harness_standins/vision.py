"""torchvision stand-ins.

* Always: ``torchvision._meta_registrations`` is replaced by an empty module before torchvision
  is imported. The only torchvision 0.28 wheel on PyPI is built against CUDA torch; with the CPU
  torch its C operators (``nms``, ``roi_align``...) do not load and that module's
  ``register_fake("torchvision::nms")`` makes ``import torchvision`` fail. Without it, datasets,
  transforms, models and ``utils.save_image`` work; ``torchvision.ops`` does not (no script of
  the manifest uses it). Harmless where the operators do load.
* Always: torchvision's own API drift (``transforms.Scale``, ``RandomSizedCrop``, ``Normalize``
  with 3 means on a 1-channel image), see ``_torchvision_drift``.
* ``datasets``: MNIST, FashionMNIST, KMNIST, QMNIST, CIFAR10, CIFAR100, SVHN and
  ImageFolder/DatasetFolder are subclasses of the real classes that hold random data of the real
  shapes and dtypes (``HARNESS_DATASET_SIZE`` samples, default 64; ImageFolder images are
  ``HARNESS_IMAGE_SIZE`` pixels square, default 64) instead of reading or downloading files. Their
  ``__getitem__``, transforms and legacy attributes (``train_data``, ``test_labels``...) are the
  real ones.
* ``pretrained``: the model builders of ``torchvision.models`` drop ``pretrained=True`` and
  ``weights=`` and build randomly initialised models (no download).
"""

from __future__ import annotations

import functools
import os
import sys
import types


def _size() -> int:
    return int(os.environ.get("HARNESS_DATASET_SIZE", "64") or 64)


def _rng(seed_text: str):
    import numpy as np

    import zlib

    return np.random.RandomState(zlib.crc32(seed_text.encode()))


def _fake_datasets(tv) -> None:
    import numpy as np
    import torch
    from torchvision import datasets
    from torchvision.datasets.vision import VisionDataset
    from PIL import Image

    def make_root(root) -> None:
        # the real classes download into root (and scripts save images beside the data)
        if isinstance(root, (str, os.PathLike)) and str(root):
            os.makedirs(os.path.expanduser(str(root)), exist_ok=True)

    def mnist_like(base):
        class Fake(base):
            def __init__(self, root, train=True, transform=None, target_transform=None, download=False, **kwargs):
                VisionDataset.__init__(self, root, transform=transform, target_transform=target_transform)
                make_root(root)
                self.train = train
                rng = np.random.RandomState(1 if train else 2)
                n = _size()
                self.data = torch.from_numpy(rng.randint(0, 256, (n, 28, 28)).astype(np.uint8))
                self.targets = torch.from_numpy(rng.randint(0, 10, n).astype(np.int64))

        Fake.__name__ = Fake.__qualname__ = base.__name__
        Fake.__module__ = base.__module__
        return Fake

    def cifar_like(base, classes):
        class Fake(base):
            def __init__(self, root, train=True, transform=None, target_transform=None, download=False, **kwargs):
                VisionDataset.__init__(self, root, transform=transform, target_transform=target_transform)
                make_root(root)
                self.train = train
                rng = np.random.RandomState(3 if train else 4)
                n = _size()
                self.data = rng.randint(0, 256, (n, 32, 32, 3)).astype(np.uint8)
                self.targets = [int(t) for t in rng.randint(0, classes, n)]
                self.classes = [f"class_{i}" for i in range(classes)]
                self.class_to_idx = {c: i for i, c in enumerate(self.classes)}

        Fake.__name__ = Fake.__qualname__ = base.__name__
        Fake.__module__ = base.__module__
        return Fake

    class SVHN(datasets.SVHN):
        def __init__(self, root, split="train", transform=None, target_transform=None, download=False):
            VisionDataset.__init__(self, root, transform=transform, target_transform=target_transform)
            self.split = split
            rng = np.random.RandomState(5)
            n = _size()
            self.data = rng.randint(0, 256, (n, 3, 32, 32)).astype(np.uint8)
            self.labels = rng.randint(0, 10, n).astype(np.int64)

    image_size = int(os.environ.get("HARNESS_IMAGE_SIZE", "64") or 64)

    def fake_loader(path):
        rng = _rng(str(path))
        return Image.fromarray(rng.randint(0, 256, (image_size, image_size, 3)).astype(np.uint8), "RGB")

    def folder_like(base):
        class Fake(base):
            def __init__(self, root, *args, transform=None, target_transform=None, **kwargs):
                VisionDataset.__init__(self, root, transform=transform, target_transform=target_transform)
                self.loader = fake_loader
                self.extensions = (".jpg",)
                self.classes = ["class_0", "class_1"]
                self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
                self.samples = [(os.path.join(str(root), f"class_{i % 2}", f"{i}.jpg"), i % 2) for i in range(_size())]
                self.targets = [target for _, target in self.samples]
                self.imgs = self.samples

        Fake.__name__ = Fake.__qualname__ = base.__name__
        Fake.__module__ = base.__module__
        return Fake

    replacements = {
        "MNIST": mnist_like(datasets.MNIST),
        "FashionMNIST": mnist_like(datasets.FashionMNIST),
        "KMNIST": mnist_like(datasets.KMNIST),
        "CIFAR10": cifar_like(datasets.CIFAR10, 10),
        "CIFAR100": cifar_like(datasets.CIFAR100, 100),
        "SVHN": SVHN,
        "ImageFolder": folder_like(datasets.ImageFolder),
    }
    for name, fake in replacements.items():
        setattr(datasets, name, fake)
        for module_name in ("torchvision.datasets.mnist", "torchvision.datasets.cifar",
                            "torchvision.datasets.svhn", "torchvision.datasets.folder"):
            module = sys.modules.get(module_name)
            if module is not None and hasattr(module, name):
                setattr(module, name, fake)


def _torchvision_drift(tv) -> None:
    """torchvision API drift since 2017-2018 (not torch's): ``transforms.Scale`` and
    ``RandomSizedCrop`` (renamed ``Resize``/``RandomResizedCrop``, removed in 0.15), and
    ``Normalize`` with more means than the image has channels (torchvision <= 0.2 zipped them, so
    ``Normalize((0.5,0.5,0.5), (0.5,0.5,0.5))`` worked on 1-channel MNIST; now it is a
    broadcast error): the extra means and deviations are dropped as they were then."""
    from torchvision import transforms

    if not hasattr(transforms, "Scale"):
        transforms.Scale = transforms.Resize
    if not hasattr(transforms, "RandomSizedCrop"):
        transforms.RandomSizedCrop = transforms.RandomResizedCrop
    normalize = transforms.Normalize.forward

    def forward(self, tensor):
        import torch

        if isinstance(tensor, torch.Tensor) and tensor.dim() >= 3:
            channels = tensor.shape[-3]
            mean, std = self.mean, self.std
            if isinstance(mean, (list, tuple)) and len(mean) > channels:
                saved = (self.mean, self.std)
                self.mean, self.std = list(mean)[:channels], list(std)[:channels]
                try:
                    return normalize(self, tensor)
                finally:
                    self.mean, self.std = saved
        return normalize(self, tensor)

    transforms.Normalize.forward = forward


def _drop_pretrained(tv) -> None:
    import torchvision.models as models

    def wrap(builder):
        @functools.wraps(builder)
        def build(*args, **kwargs):
            if kwargs.pop("pretrained", None):
                sys.stderr.write(f"[run-harness] {builder.__name__}(pretrained=True): random weights\n")
            kwargs.pop("weights", None)
            return builder(*args, **kwargs)

        return build

    for name in dir(models):
        builder = getattr(models, name)
        if isinstance(builder, types.FunctionType) and name[0].islower() and not name.startswith("get_"):
            setattr(models, name, wrap(builder))
            for module in list(sys.modules.values()):
                if getattr(module, "__name__", "").startswith("torchvision.models.") and getattr(module, name, None) is builder:
                    setattr(module, name, wrap(builder))


def install(datasets: bool, pretrained: bool) -> None:
    from . import when_imported

    sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
    when_imported("torchvision", _torchvision_drift)
    if datasets:
        when_imported("torchvision", _fake_datasets)
    if pretrained:
        when_imported("torchvision", _drop_pretrained)
