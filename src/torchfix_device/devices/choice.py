"""What a site gets from :mod:`torchfix_device.devices.source`: a device expression, or the reason
there is none (plain data, shared by the modules that choose a device)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceExpr:
    """A device expression valid at the site, e.g. ``x.device`` or ``device``."""

    code: str
    unproven: str | None = None
    """Why nothing shows the expression works at the site (then only an unsafe fix may use it;
    given only to a caller that asks for such a device)."""


@dataclass(frozen=True)
class NoDevice:
    """No device can be chosen safely at the site; ``reason`` says why (shown to the user)."""

    reason: str
