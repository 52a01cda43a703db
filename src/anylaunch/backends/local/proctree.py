"""Ending process trees: SIGTERM, a grace period, then SIGKILL for what is left."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable

import psutil


def kill(procs: Iterable[psutil.Process]) -> None:
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()


def end_descendants(root: psutil.Process, grace: float) -> None:
    """End every descendant of `root`, including orphans re-parented to it meanwhile."""
    procs = root.children(recursive=True)
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.terminate()
    psutil.wait_procs(procs, timeout=grace)
    for _ in range(5):
        rest = root.children(recursive=True)
        if not rest:
            return
        kill(rest)
        psutil.wait_procs(rest, timeout=2)


def job_processes(job_id: str) -> list[psutil.Process]:
    """Every process of a local job, found by the ANYLAUNCH_JOB_ID its supervisor gave it
    (inherited by every descendant, even one re-parented after its parent died)."""
    found = []
    me = os.getpid()
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        with contextlib.suppress(psutil.Error):
            if proc.environ().get("ANYLAUNCH_JOB_ID") == job_id:
                found.append(proc)
    return found
