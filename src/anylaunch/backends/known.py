"""The backends this version ships, by name: the list job files' sections and the
dashboard's filter are checked against.

Each name has a folder `anylaunch/backends/<name>/` and a line in the registry
(`base._REGISTRY`), which imports the folder only when the backend is used. A backend
registered from outside the package (`base.register`, ANYLAUNCH_BACKENDS) has a name
outside this list, so command arguments and `--json` outputs carry a backend's name as
a string, checked against the registry when a job is routed.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

BACKENDS: tuple[str, ...] = ("local", "slurm", "skypilot", "lepton")
BackendName = Annotated[
    str, Field(description="local, slurm, skypilot, lepton, or a registered backend's name")
]
