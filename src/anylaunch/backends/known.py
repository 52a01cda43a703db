"""The backends this version ships, by name: the one list that job files, command
arguments, `--json` schemas and the dashboard are checked against.

Each name has a folder `anylaunch/backends/<name>/` and a line in the registry
(`base.get_backend`), which imports the folder only when the backend is used.
"""

from __future__ import annotations

from typing import Literal, get_args

BackendName = Literal["local", "slurm", "skypilot", "lepton"]
BACKENDS: tuple[str, ...] = get_args(BackendName)
