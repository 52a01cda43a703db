"""anylaunch: launch GPU training jobs anywhere from one job description.

The public names are loaded on first use so that `import anylaunch` (and the CLI's
`--help`) stay as fast as bare Python start-up.
"""

from __future__ import annotations

from anylaunch.lazy import TYPE_CHECKING, lazy_exports

__version__ = "0.1.0"
__all__ = ["Job", "JobSpec", "State", "dry_run", "get", "jobs", "load", "submit"]

__getattr__ = lazy_exports(
    __name__,
    {
        "load": "anylaunch.api",
        "submit": "anylaunch.api",
        "dry_run": "anylaunch.api",
        "get": "anylaunch.api",
        "jobs": "anylaunch.api",
        "Job": "anylaunch.api",
        "JobSpec": "anylaunch.spec",
        "State": "anylaunch.state",
    },
)

if TYPE_CHECKING:
    from anylaunch.api import Job, dry_run, get, jobs, load, submit
    from anylaunch.spec import JobSpec
    from anylaunch.state import State
