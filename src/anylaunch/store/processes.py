"""Who submits a job or advances a workflow: a process named by pid and start time, so a
dead one can be told from a reused pid."""

from __future__ import annotations

import os
from typing import Any


def this_process() -> dict[str, float]:
    """Who is submitting: pid and start time, so a dead submitter can be told from a reused pid."""
    from anylaunch.store.proctime import create_time

    return {"pid": os.getpid(), "started": create_time()}


def alive(process: dict[str, Any] | None) -> bool:
    """Whether the process `this_process()` described (on this host) still runs."""
    import psutil

    if not process:
        return False
    try:
        proc = psutil.Process(int(process["pid"]))
        return (
            abs(proc.create_time() - float(process["started"])) < 0.5
            and proc.status() != psutil.STATUS_ZOMBIE
        )
    except (psutil.NoSuchProcess, KeyError, TypeError, ValueError):
        return False


def busy_elsewhere(process: dict[str, Any] | None) -> bool:
    """Whether another live process (not this one) is submitting the job."""
    return alive(process) and process is not None and process.get("pid") != os.getpid()
