"""The records of the store, as the rest of the code sees them: a job, what a poll
learned about one, a workflow and a workflow's step."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from anylaunch.state import State


@dataclass
class JobRecord:
    """One row of the store, as the rest of the code sees it."""

    id: str
    name: str
    backend: str
    state: State
    job_dir: str
    native_id: str | None = None
    exit_code: int | None = None
    detail: str | None = None
    run_id: str | None = None
    split_id: int | None = None
    spec: dict[str, Any] = field(default_factory=dict)
    plan: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    # Which code it ran: {repo, commit, branch, dirty} of the folder its code came from
    # (all None outside git) and, for a job run from a snapshot, `snapshot`: its hash,
    # files and bytes. None: nothing is known (not in git, no snapshot; an older job).
    source: dict[str, Any] | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    cancel_requested_at: float | None = None
    # Not stored: set by a poll whose backend did not answer, the line saying so; the
    # state shown is then the last known one.
    stale: str | None = field(default=None, compare=False)

    @property
    def unknown_for_good(self) -> bool:
        """UNKNOWN, and nothing will ever tell how the job ended (`Store.mark_unknown`
        with `final`): its detail says why. Nothing waits for it any longer."""
        return self.state is State.UNKNOWN and bool(self.meta.get("outcome_unknown"))

    def summary(self) -> dict[str, Any]:
        """The stable `--json` shape of a job (contract: id, state, backend, native_id, exit_code)."""
        return {
            "id": self.id,
            "kind": "job",
            "name": self.name,
            "state": self.state.value,
            "backend": self.backend,
            "native_id": self.native_id,
            "exit_code": self.exit_code,
            "detail": self.detail,
            "run_id": self.run_id,
            "split_id": self.split_id,
            "job_dir": self.job_dir,
            "source": self.source,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "stale": self.stale,
        }


@dataclass(frozen=True)
class Update:
    """What one poll learned about one job, as the store writes it (`Store.apply`).

    `state` None: the poll said nothing about the state (a `detail` still updates a live
    job's, as `note` does). `native_id`/`meta`: the job's
    new native id or metadata (a launch request became a job, a resubmission was made);
    written only while the stored native id is still `expected_native_id`, so of two
    processes polling one job only the first records the change, and only if it changes
    something, so a repeated observation writes nothing twice. `events` are written with
    that change. `attempt`: the change starts a new attempt of the job, which a job that
    ended or was asked to cancel must never get.
    """

    job_id: str
    state: State | None = None
    exit_code: int | None = None
    detail: str | None = None
    final: bool = False  # UNKNOWN for good (see `mark_unknown`)
    native_id: str | None = None
    expected_native_id: str | None = None
    meta: dict[str, Any] | None = None
    events: tuple[str, ...] = ()
    attempt: bool = False


@dataclass
class WorkflowRecord:
    """One workflow: its steps as planned (`doc`), who advances it, and its last state."""

    id: str
    name: str
    file: str
    doc: dict[str, Any]
    state: str
    controller: dict[str, Any] | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    cancel_requested_at: float | None = None


@dataclass
class StepRow:
    """A step the controller decided to start: the run that holds its jobs, and the
    error that kept it from being submitted, if one did."""

    step_id: str
    run_id: str
    error: str | None
    created_at: float
