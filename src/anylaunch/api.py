"""The Python API; the CLI, the MCP server and the dashboard are layers over it.

spec = anylaunch.load("train.yaml")
job = anylaunch.submit(spec)          # returns at once
job.wait(); print(job.logs())

Launching goes through the stages of `anylaunch.launch` (resolve, check, render, record,
send); a submitted job is a `Job` of `anylaunch.observe.watch`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from anylaunch.backends.base import Backend
from anylaunch.jobfile import loader
from anylaunch.jobfile.spec import JobSpec
from anylaunch.launch import pipeline, preflight
from anylaunch.launch.resolve import resolve
from anylaunch.observe.watch import Job, get, jobs
from anylaunch.state import State
from anylaunch.store import Store

__all__ = ["Job", "JobSpec", "State", "checks", "dry_run", "get", "jobs", "load", "submit"]

if TYPE_CHECKING:
    from anylaunch.backends.checks import Check
    from anylaunch.backends.plan import Plan


def load(
    path: str | os.PathLike[str],
    *,
    overrides: Sequence[str] = (),
    command: Sequence[str] | None = None,
) -> JobSpec:
    """Read and validate a job file; `command` replaces the file's command (`run -- ...`)."""
    spec = loader.load(path, overrides_=overrides)
    if command:
        spec = spec.model_copy(update={"command": list(command)})
    return spec


def dry_run(spec: JobSpec, backend: str | None = None, *, store: Store | None = None) -> Plan:
    """The plan `submit` would send, rendered by the same stages, with no side effects."""
    return pipeline.dry_run(resolve(spec, backend), store or Store())


def submit(
    spec: JobSpec,
    backend: str | Backend | None = None,
    *,
    store: Store | None = None,
    run_id: str | None = None,
    split_id: int | None = None,
    check: bool = True,
) -> Job:
    """Record the job, then submit it; returns as soon as the backend accepted it.

    `backend` is a name, or a backend already built (one given its own credentials,
    as `anylaunch.sdk.LeptonSDK` does). `check` runs the quick preflight checks first
    (PreflightFailed, nothing stored).
    """
    store = store or Store()
    resolved = resolve(spec, backend)
    if check:
        pipeline.check(resolved)
    record = pipeline.submit(resolved, store, run_id=run_id, split_id=split_id)
    return Job(store.get(record.id), store, backend if isinstance(backend, Backend) else None)


def checks(spec: JobSpec, backend: str | None = None, *, deep: bool = False) -> list[Check]:
    """Preflight: every check for this job, ok / warn / fail with a fix (nothing submitted)."""
    return preflight.run(resolve(spec, backend), deep=deep)
