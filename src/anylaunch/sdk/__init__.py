"""The TAO SDK's `LeptonSDK` surface, built on anylaunch's Lepton backend and store.

Users of the TAO-on-Lepton SDK keep their calls (`create_job`, `get_volumes`, ...);
the jobs they make are anylaunch jobs. `from anylaunch.sdk import LeptonSDK` imports
httpx only then, not at CLI start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from anylaunch.lazy import lazy_exports

__all__ = ["LeptonSDK"]

if TYPE_CHECKING:
    from anylaunch.sdk.lepton_sdk import LeptonSDK

__getattr__ = lazy_exports(__name__, {"LeptonSDK": "anylaunch.sdk.lepton_sdk"})
