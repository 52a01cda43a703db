"""The records of the store, as the rest of the code sees them: a job, one of its
attempts, what a poll learned about one, a workflow and a workflow's step."""

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

    @property
    def attempt(self) -> int:
        """The number of the job's current attempt (ANYLAUNCH_ATTEMPT): 1 for the first."""
        number = self.meta.get("attempt", 1)
        return number if isinstance(number, int) and not isinstance(number, bool) else 1

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
            "attempt": self.attempt,
            "job_dir": self.job_dir,
            "source": self.source,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "stale": self.stale,
        }


@dataclass
class Attempt:
    """One run of a job on its backend: where it ran, how it ended, what diagnosis said
    of it, why the next attempt was made (`next`, None when none was) and the nodes it
    was kept away from (`avoided`, after an earlier attempt failed on them)."""

    job_id: str
    number: int  # ANYLAUNCH_ATTEMPT: 1 for the first
    native_id: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    state: State | None = None  # how it ended; None while it runs, or when nobody knows
    exit_code: int | None = None
    nodes: list[str] = field(default_factory=list)
    avoided: list[str] = field(default_factory=list)
    diagnosis: dict[str, Any] | None = None
    next: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The stable `--json` shape of an attempt (in `status JOB`)."""
        return {
            "id": f"{self.job_id}#{self.number}",
            "kind": "attempt",
            "attempt": self.number,
            "native_id": self.native_id,
            "state": self.state.value if self.state else None,
            "exit_code": self.exit_code,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "nodes": self.nodes,
            "avoided": self.avoided,
            "diagnosis": self.diagnosis,
            "next": self.next,
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
    ended_as: State | None = None  # with `attempt`: how the attempt before it ended
    # Attempts as the job itself recorded them (a Slurm job continuing itself): each a
    # mapping with `attempt` (its number) and what is known of it, written over the rows.
    attempts: tuple[dict[str, Any], ...] = ()


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
