"""The backend contract: what every backend folder implements, and how it is found.

A backend subclasses `Backend`. Rendering (`plan`) is pure; `prepare` is the one place
allowed to look at the world (free ports, GPU count) before rendering; `submit`, `poll`,
`cancel` and `logs` are the side effects. `reconcile`, `native_signals`, `preflight` and
`shared_filesystem` are optional: the defaults below say what the API does for a backend
that leaves them out. A backend that submits many splits as one native job also
implements `ArraySubmission`, and one that takes a whole graph of steps with native
dependencies `ChainSubmission`; callers test for them with `isinstance`, never by the
backend's type.

What is common to every backend is done once by the API, not by each backend: the
submission pipeline (`anylaunch.launch.pipeline`), the check of `logs --node` against the
plan's node count and the reading and masking of logs, and the secret values handed to
`submit` (the names come from `Plan.secret_env`, the values from `secret_values`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from anylaunch.backends import registry
from anylaunch.errors import BackendError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from anylaunch.backends.checks import Check
    from anylaunch.backends.plan import Plan
    from anylaunch.jobfile.spec import JobSpec
    from anylaunch.state import State
    from anylaunch.store import JobRecord, Store


@dataclass(frozen=True)
class Capabilities:
    cancel_on_interrupt: bool = False  # Ctrl-C of an attached `run` cancels the job
    # The `launcher:` modes this backend starts ranks with (`srun` needs Slurm's).
    launchers: frozenset[str] = frozenset({"torchrun", "none"})
    # anylaunch's own steps that run inside the job's image, where only what the image
    # carries exists ("stage-in", "resume"); elsewhere they run on the node itself.
    steps_in_image: frozenset[str] = frozenset()
    # `watchdog:` is carried out: something of ours inside the job watches its output.
    watchdog: bool = False
    # The job can run from a snapshot of a folder of this machine (`snapshot:`, see
    # `Plan.snapshot`); a backend that runs only what its image holds cannot.
    snapshot: bool = False
    # A job continues itself from inside its allocation, past a time limit and after a
    # failure its policy retries (a Slurm job requeues itself): its controller on this
    # host is started only when the job ends otherwise, by the command that sees it
    # end. Elsewhere a job with a retry policy gets its controller when it is sent.
    continues_in_job: bool = False
    # The next attempt can be kept off named nodes (Slurm: --exclude; Lepton: the node
    # group's other nodes, for a job on one: `can_keep_off`); elsewhere a failure
    # attributed to a node is only noted.
    avoids_nodes: bool = False


@dataclass(frozen=True)
class Credential:
    """An environment variable a backend cannot submit without (or one of its
    alternatives), and where to get it."""

    name: str
    fix: str
    alternatives: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlanContext:
    """Facts fixed before rendering, so that `plan` itself stays pure."""

    job_id: str
    job_dir: str
    values: Mapping[str, Any] = field(default_factory=dict)  # backend-specific (ports, ...)


@dataclass(frozen=True)
class Observation:
    """What one poll learned about one job. A poll only reports: `watch.refresh` writes
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
    ended_as: State | None = None  # with `attempt`: how the attempt before it ended
    # The attempts as the job recorded them itself, for a backend whose jobs continue
    # themselves (`Capabilities.continues_in_job`): each a mapping with `attempt` (its
    # number) and what is known of it (started_at, ended_at, state, exit_code, nodes,
    # avoided, diagnosis, next).
    attempts: tuple[Mapping[str, Any], ...] = ()
    # Poll this job again once the change is recorded: a resubmission is claimed in the
    # store first, and only the process whose claim was recorded creates the new job.
    again: bool = False


@dataclass(frozen=True)
class LogSource:
    """One node's log as a file on this host (local) or text fetched from the backend."""

    node: int
    path: str | None = None
    text: str | None = None


@dataclass(frozen=True)
class Entry:
    """How to run a command on one node of a running job: a program run here (`exec`,
    `shell`). `via` says in one line how it gets there."""

    argv: list[str]
    via: str
    env: Mapping[str, str] | None = None  # None: this process's own
    cwd: str | None = None
    # Values to mask in what it prints, where this side knows them (the node's secrets).
    secrets: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Relay:
    """How one forwarded connection reaches a port on a node (`forward`): a TCP address
    this machine can open, or a program run per connection whose standard input and
    output are the connection."""

    via: str
    address: tuple[str, int] | None = None
    argv: list[str] | None = None
    env: Mapping[str, str] | None = None  # the program's environment; None: this process's


# What `reconcile` answers: job id -> (native id, metadata for the store).
Found = dict[str, tuple[str | None, dict[str, Any]]]
# What `submit` answers: the native id and backend metadata for the store.
Submitted = tuple[str, dict[str, Any]]


class Backend(ABC):
    """One platform jobs run on. Subclass it in the backend's own folder and add one
    line to the registry (`register`)."""

    name: ClassVar[str]
    capabilities: ClassVar[Capabilities] = Capabilities()
    # The pydantic model of the backend's own mapping in the job file, under its name
    # (`slurm:`), kept in its own folder; None: the backend reads only the neutral keys.
    # `JobSpec` finds it here, importing the backend only for a job file that has one.
    section: ClassVar[type[BaseModel] | None] = None
    # What the submitting environment must hold (preflight's `credentials` check).
    credentials: ClassVar[tuple[Credential, ...]] = ()

    # -- rendering: no side effect on the platform ----------------------------------------

    @abstractmethod
    def prepare(
        self, spec: JobSpec, job_id: str, job_dir: str, store: Store, *, reserve: bool = True
    ) -> PlanContext:
        """Learn what rendering needs from the world; `reserve=False` for dry runs."""

    @abstractmethod
    def plan(self, spec: JobSpec, ctx: PlanContext) -> Plan:
        """The exact thing `submit` sends, with the node count and the secret names."""

    @abstractmethod
    def describe(self, plan: Plan) -> str:
        """The plan as a person reads it (`run --dry-run` without --json)."""

    def secret_values(self, spec: JobSpec) -> dict[str, str]:
        """Every secret value this backend's plans may name (`Plan.secret_env`), by name.

        Default: the job's secret `env` entries. A backend whose own section holds
        secrets too (`slurm.env_vars`) adds them here: the pipeline hands `submit`
        exactly the values its plan names, and nothing else carries them.
        """
        return spec.secret_env()

    def preflight(self, spec: JobSpec, *, deep: bool = False) -> list[Check]:
        """This backend's own checks, after the common ones. Default: none."""
        return []

    def time_limit_s(self, spec: JobSpec) -> int | None:
        """The job's time limit in seconds, where the backend's section sets one."""
        return None

    def too_big(self, spec: JobSpec, nodes: int, ranks: int) -> tuple[str, str] | None:
        """Why a job of `nodes` x `ranks` cannot run here beyond the common limits, and
        its fix; None when it fits. Default: the common limits are all there is."""
        return None

    # -- side effects ---------------------------------------------------------------------

    @abstractmethod
    def submit(self, plan: Plan, secrets: Mapping[str, str]) -> Submitted:
        """Send the plan; return the native id and backend metadata for the store.

        `secrets` holds the value of every name in `plan.secret_env`, and only those.
        Raise `SubmitOutcomeUnknown` when the platform may have taken the job but its
        answer was lost: the job stays UNKNOWN and `reconcile` looks for it later.
        """

    @abstractmethod
    def poll(self, jobs: Sequence[JobRecord]) -> dict[str, Observation]:
        """Observe many jobs with as few backend calls as possible (one, ideally)."""

    @abstractmethod
    def cancel(self, job: JobRecord) -> None: ...

    @abstractmethod
    def logs(self, job: JobRecord) -> Iterator[LogSource]:
        """Every node's log, node 0 first. The API picks one node (`--node`), checks it
        against the plan's node count, reads and masks: a backend only says where."""

    def reconcile(self, jobs: Sequence[JobRecord]) -> Found | None:
        """Which of these jobs, recorded but without a native id (their submitter died),
        the platform has: found jobs map to their native id and metadata; jobs left out
        were never submitted and may be submitted again.

        Default: None, "this backend cannot tell": such jobs are neither adopted nor
        resubmitted (a second copy of a job is worse than a job left to the user).
        """
        return None

    def native_signals(self, job: JobRecord) -> list[str]:
        """The platform's own words about how the job went (events, reasons), for
        `diagnose`. Default: none beyond the job's detail."""
        return []

    # -- a running job's nodes (exec, shell, forward, stack) ---------------------------

    def enter(self, job: JobRecord, node: int, command: Sequence[str], *, tty: bool) -> Entry:
        """What to run here to run `command` (empty: the node's shell) in node `node`'s
        environment and folder; `tty` asks for a terminal on the node. Default: none."""
        raise NotReachable(self.unreachable())

    def stacks(
        self, job: JobRecord, node: int | None, py_spy: str | None, secret_names: Sequence[str]
    ) -> list[dict[str, Any]]:
        """The Python stack of every rank (of `node`), by rank: `rank`, `local_rank`,
        `node`, `pid`, `host`, and `stack` (py-spy's dump, secrets masked) or `error`.
        `py_spy` is the submitting side's py-spy, used where the node sees it."""
        raise NotReachable(self.unreachable())

    def relay(self, job: JobRecord, node: int, port: int) -> Relay:
        """How a connection from here reaches `port` on node `node`. Default: none."""
        raise NotReachable(self.unreachable())

    def unreachable(self) -> str:
        """Why this backend cannot reach a running job's nodes, and what to do instead."""
        return (
            f"the {self.name} backend cannot reach a running job's nodes"
            " (no exec, shell, forward or stack) — read its output with anylaunch logs"
        )

    def hosts(self, job: JobRecord) -> list[str]:
        """The hosts the job's current attempt ran on, node 0 first, where the platform
        says: a failure diagnosis pins on a node is named through them, and the next
        attempt avoids it. Default: none known."""
        return []

    def can_keep_off(self, job: JobRecord) -> bool:
        """Whether this job's next attempt can be kept off named nodes. Default: the
        backend's `Capabilities.avoids_nodes` (a backend that can for some jobs only says
        which)."""
        return self.capabilities.avoids_nodes

    def keep_off(self, spec: JobSpec, ctx: PlanContext, hosts: Sequence[str]) -> PlanContext:
        """The context of an attempt that must not run on `hosts` (where an earlier one
        failed), for a backend that can keep a job off nodes (`Capabilities.avoids_nodes`).
        Called after `prepare`, so it may ask the platform. Default: unchanged."""
        return ctx

    def shared_filesystem(self, spec: JobSpec) -> str | None:
        """Which filesystem this job's staging cache lives on, named so that two jobs
        whose names are equal see the same files there; None when it has none that
        outlives the job. A workflow step reads an earlier step's output in place when
        both name the same one (otherwise it downloads it from S3). Default: none."""
        return None


class NoNodeLeft(BackendError):
    """Every node the job could run on is one an earlier attempt failed on (`keep_off`):
    no attempt is sent, and the job ends as its last attempt did."""

    code = "NO_NODE_LEFT"


class NotReachable(BackendError):
    """The backend has no way onto a running job's nodes (or not for this job)."""

    code = "NOT_REACHABLE"


@runtime_checkable
class ArraySubmission(Protocol):
    """What a backend adds to submit all splits of a run as one native array job."""

    def plan_array(self, spec: JobSpec, splits: Sequence[tuple[int, PlanContext]]) -> Plan:
        """One plan for every (split id, context), in that order."""
        ...

    def submit_array(
        self, plan: Plan, secrets: Mapping[str, str]
    ) -> list[tuple[str, dict[str, Any]]]:
        """Submit once; one (native id, meta) per split, in the plan's split order."""
        ...

    def task_plan(self, plan: dict[str, Any], first_job_id: str) -> dict[str, Any]:
        """What the record of each split after the first keeps of the array's plan (as
        JSON): the first keeps all of it, so the parts that list every split are stored
        once, not once per split."""
        ...


@dataclass(frozen=True)
class ChainStep:
    """One step of a graph handed to a backend whole (`ChainSubmission`): its job (with
    `splits`: one job per split), the run that holds its jobs (every split and every
    attempt), and the steps it needs."""

    id: str
    spec: JobSpec
    run_id: str
    needs: tuple[str, ...] = ()

    @property
    def split_ids(self) -> list[int] | None:
        """The step's split ids; None for a step that is one job."""
        if self.spec.splits is None:
            return None
        return list(range(len(self.spec.split_values())))


# Called just before a step's first jobs are recorded (a workflow writes its step row).
OnStart = Callable[[ChainStep], None]


@runtime_checkable
class ChainSubmission(Protocol):
    """What a backend adds to take a whole graph of steps at once, each step waiting on
    the steps it needs with the platform's own dependencies: once handed over, the graph
    runs to its end with no process of ours left running. A workflow whose steps all run
    on one such backend is handed over whole, with no controller."""

    def with_needs(self, spec: JobSpec, after: Sequence[str]) -> JobSpec:
        """The spec as submitted to start only once the jobs `after` (native ids; in a
        dry run, a `<step>` for each step it needs) have succeeded."""
        ...

    def describe_chain(self) -> str:
        """One line for the dry run: how the graph is handed over, and what `<step>`
        stands for in the plans shown."""
        ...

    def submit_chain(
        self, steps: Sequence[ChainStep], store: Store, on_start: OnStart | None = None
    ) -> None:
        """Hand over every step not handed over yet, in dependency order, and return
        (the steps' quick checks are the caller's, before it). Called again after a
        crash midway, it finishes the submission and sends no job twice; a step one of
        whose needs failed is not handed over."""
        ...

    def retry_chain(
        self, steps: Sequence[ChainStep], store: Store, on_start: OnStart | None = None
    ) -> dict[str, list[int]]:
        """Resubmit the failed splits of each failed step and every step after them that
        did not succeed, each waiting on the new jobs of the steps it needs; {step: split
        ids resubmitted} ([] for a step that is one job)."""
        ...


def get_backend(name: str) -> Backend:
    """The backend called `name`, its module imported now."""
    return backend_class(name)()


def backend_class(name: str) -> type[Backend]:
    """The class of the backend called `name` (its module imported now)."""
    found = registry.load(name)
    if not (isinstance(found, type) and issubclass(found, Backend)):
        raise TypeError(f"{registry.target(name)} is not an anylaunch Backend")
    return found
