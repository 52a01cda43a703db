"""The Backend protocol: what every backend folder implements, and how it is found.

Rendering (`plan`) is pure; `prepare` is the one place allowed to look at the world
(free ports, GPU count) before rendering; `submit`, `poll`, `cancel` and `logs` are the
side effects. Differences between backends are declared in `Capabilities`, so callers
never branch on the backend's type.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from anylaunch.plan import Plan
    from anylaunch.spec import JobSpec
    from anylaunch.state import State
    from anylaunch.store import JobRecord, Store


@dataclass(frozen=True)
class Capabilities:
    supports_arrays: bool = False  # splits go out as one native array job
    native_retries: bool = False  # the platform restarts failed jobs itself
    log_follow: bool = True  # logs can be followed while the job runs
    cancel_on_interrupt: bool = False  # Ctrl-C of an attached `run` cancels the job


@dataclass(frozen=True)
class PlanContext:
    """Facts fixed before rendering, so that `plan` itself stays pure."""

    job_id: str
    job_dir: str
    values: Mapping[str, Any] = field(default_factory=dict)  # backend-specific (ports, ...)


@dataclass(frozen=True)
class Observation:
    """What one poll learned about one job. A poll only reports: `api.refresh` writes
    every job's observation to the store in one transaction (`Store.apply`)."""

    state: State
    exit_code: int | None = None
    detail: str | None = None
    # UNKNOWN for good: the backend will never learn more (the local supervisor died
    # with the result). Recorded as UNKNOWN rather than guessed FAILED.
    final: bool = False
    # The job's new native id or metadata (a launch request became a job, a job was
    # resubmitted or relaunched), recorded only while the stored native id still is
    # `expected_native_id`: of two processes polling the same job, one records it.
    native_id: str | None = None
    expected_native_id: str | None = None
    meta: Mapping[str, Any] | None = None
    events: tuple[str, ...] = ()  # lines for the job's history, written with the change
    # The change starts a new attempt: never recorded for a job that ended or was asked
    # to cancel, so a late poll cannot restart a job the user stopped.
    attempt: bool = False
    # Poll this job again once the change is recorded: a resubmission is claimed in the
    # store first, and only the process whose claim was recorded creates the new job.
    again: bool = False


@dataclass(frozen=True)
class LogSource:
    """One node's log as a file on this host (local) or text fetched from the backend."""

    node: int
    path: str | None = None
    text: str | None = None


class Backend(Protocol):
    name: ClassVar[str]
    capabilities: ClassVar[Capabilities]

    def prepare(
        self, spec: JobSpec, job_id: str, job_dir: str, store: Store, *, reserve: bool = True
    ) -> PlanContext:
        """Learn what rendering needs from the world; `reserve=False` for dry runs."""
        ...

    def plan(self, spec: JobSpec, ctx: PlanContext) -> Plan: ...

    def describe(self, plan: Plan) -> str:
        """The plan as a person reads it (`run --dry-run` without --json)."""
        ...

    def submit(self, plan: Plan, secrets: Mapping[str, str]) -> tuple[str, dict[str, Any]]:
        """Send the plan; return the native id and backend metadata for the store."""
        ...

    def poll(self, jobs: Sequence[JobRecord]) -> dict[str, Observation]:
        """Observe many jobs with as few backend calls as possible (one, ideally)."""
        ...

    def cancel(self, job: JobRecord) -> None: ...

    def logs(self, job: JobRecord, node: int | None = None) -> Iterator[LogSource]: ...


_REGISTRY = {
    "local": "anylaunch.backends.local.backend:LocalBackend",
    "lepton": "anylaunch.backends.lepton.backend:LeptonBackend",
    "slurm": "anylaunch.backends.slurm.backend:SlurmBackend",
    "skypilot": "anylaunch.backends.skypilot.backend:SkyPilotBackend",
}


def get_backend(name: str) -> Backend:
    """Import a backend only when it is used: `--help` must not pay for any of them."""
    from anylaunch.errors import UsageError

    target = _REGISTRY.get(name)
    if target is None:
        raise UsageError(
            f"the {name} backend is not available in this version — use --backend local",
            code="BACKEND_UNAVAILABLE",
        )
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)()
