"""anylaunch: launch GPU training jobs anywhere from one job description.

The public names are loaded on first use so that `import anylaunch` (and the CLI's
`--help`) stay as fast as bare Python start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Job", "JobSpec", "State", "dry_run", "get", "jobs", "load", "submit"]

_LAZY = {
    "load": "anylaunch.api",
    "submit": "anylaunch.api",
    "dry_run": "anylaunch.api",
    "get": "anylaunch.api",
    "jobs": "anylaunch.api",
    "Job": "anylaunch.api",
    "JobSpec": "anylaunch.spec",
    "State": "anylaunch.state",
}

if TYPE_CHECKING:
    from anylaunch.api import Job, dry_run, get, jobs, load, submit
    from anylaunch.spec import JobSpec
    from anylaunch.state import State


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'anylaunch' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
