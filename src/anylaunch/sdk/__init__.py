"""The TAO SDK's `LeptonSDK` surface, built on anylaunch's Lepton backend and store.

Users of the TAO-on-Lepton SDK keep their calls (`create_job`, `get_volumes`, ...);
the jobs they make are anylaunch jobs. `from anylaunch.sdk import LeptonSDK` imports
httpx only then, not at CLI start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["LeptonSDK"]

if TYPE_CHECKING:
    from anylaunch.sdk.lepton_sdk import LeptonSDK


def __getattr__(name: str) -> Any:
    if name != "LeptonSDK":
        raise AttributeError(f"module 'anylaunch.sdk' has no attribute {name!r}")
    from anylaunch.sdk.lepton_sdk import LeptonSDK

    globals()[name] = LeptonSDK
    return LeptonSDK
