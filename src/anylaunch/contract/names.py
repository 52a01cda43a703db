"""How command arguments and `--json` outputs name a backend.

The backends are the registry's (`registry.names()`: the built-in ones and those registered
from outside the package), so a backend's name is a plain string here, checked against
the registry when a job is routed; no list of backends is kept anywhere else.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

BackendName = Annotated[
    str, Field(description="local, slurm, skypilot, lepton, or a registered backend's name")
]
