"""The TAO SDK's `LeptonSDK` surface, built on anylaunch's Lepton backend and store.

Users of the TAO-on-Lepton SDK keep their calls (`create_job`, `get_volumes`, ...);
the jobs they make are anylaunch jobs.
"""

from __future__ import annotations

from anylaunch.sdk.lepton_sdk import LeptonSDK

__all__ = ["LeptonSDK"]
