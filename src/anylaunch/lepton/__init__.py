"""DGX Cloud Lepton: the job API client, TAO's `LeptonSDK` surface, and a local emulator.

`from anylaunch.lepton import LeptonSDK` imports httpx only then, not at CLI start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["Credentials", "LeptonClient", "LeptonSDK"]

_LAZY = {
    "LeptonSDK": "anylaunch.lepton.sdk",
    "LeptonClient": "anylaunch.lepton.client",
    "Credentials": "anylaunch.lepton.client",
}

if TYPE_CHECKING:
    from anylaunch.lepton.client import Credentials, LeptonClient
    from anylaunch.lepton.sdk import LeptonSDK


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'anylaunch.lepton' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
