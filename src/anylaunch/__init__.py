"""anylaunch: launch GPU training jobs anywhere from one job description.

    spec = anylaunch.load("train.yaml")
    job = anylaunch.submit(spec)
    job.wait()

The public names are imported from their modules on first use, so that the command
line's `--help` does not pay for the API it does not call.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
_HOMES = {
    "Job": "anylaunch.api",
    "dry_run": "anylaunch.api",
    "get": "anylaunch.api",
    "jobs": "anylaunch.api",
    "load": "anylaunch.api",
    "submit": "anylaunch.api",
    "JobSpec": "anylaunch.jobfile.spec",
    "State": "anylaunch.state",
}
__all__ = ["Job", "JobSpec", "State", "dry_run", "get", "jobs", "load", "submit"]

if TYPE_CHECKING:
    from anylaunch.api import Job, dry_run, get, jobs, load, submit
    from anylaunch.jobfile.spec import JobSpec
    from anylaunch.state import State


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'anylaunch' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
