"""The objects `--json` prints and the MCP tools return, as pydantic models.

The builders in `anylaunch.contract.commands` produce plain dicts (so `ps --json` never imports
pydantic); these models only describe them, for the published JSON Schemas and for the
tests that validate real output. Every model forbids unknown keys: a field added to an
output without being added here fails the suite, so a change to the contract is always
a visible diff in docs/schemas/ (regenerate with `python -m anylaunch.cli.schemas`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

from anylaunch.contract.names import BackendName
from anylaunch.state import State

# The JSON Schema dialect every published schema (commands' and MCP tools') declares.
DIALECT = "https://json-schema.org/draft/2020-12/schema"


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


# Every object a command prints names what it is (`kind`) and which one (`id`, null
# when it has no identity of its own: a dry run, a preflight, an error).
NO_ID = "null: nothing is recorded"


class SnapshotOut(_Out):
    """The copy of the working folder a job runs from, made at submit time."""

    sha256: str = Field(description="`sha256:` over every path, kind and content, in order")
    files: int
    bytes: int


class Source(_Out):
    """Which code a job ran: its folder's git state at submit, and its snapshot."""

    repo: str | None = Field(
        description="the origin remote's URL (credentials removed), else the repository's"
        " folder; null outside git"
    )
    commit: str | None
    branch: str | None = Field(description="null on a detached HEAD or outside git")
    dirty: bool | None = Field(
        description="tracked files differed from the commit; null outside git"
    )
    snapshot: SnapshotOut | None = Field(
        default=None, description="the copy the job runs from (snapshot: true), if any"
    )


class JobSummary(_Out):
    """One job: the stable shape of `run --detach`, `ps` and `cancel`."""

    id: str = Field(description="anylaunch's job id (8 characters)")
    kind: Literal["job"]
    name: str
    state: State
    backend: BackendName
    native_id: str | None = Field(description="the backend's own id once submitted")
    exit_code: int | None
    detail: str | None = Field(description="the backend's latest word on the job")
    run_id: str | None = Field(description="the run this job is a split of")
    split_id: int | None
    attempt: int = Field(
        description="the job's current attempt (ANYLAUNCH_ATTEMPT), 1 for the first; its"
        " attempts are in `status JOB`"
    )
    job_dir: str
    source: Source | None = Field(
        description="the code it ran: git state of its folder at submit, its snapshot;"
        " null when neither is known"
    )
    created_at: float = Field(description="seconds since the epoch")
    updated_at: float
    stale: str | None = Field(
        description="null when this poll saw the state; else the backend's controller did"
        " not answer and `state` is the last known one: the line saying since when"
    )


class Event(_Out):
    """One change in a job's history."""

    id: str = Field(description="the job id and the event's place in its history: JOB/0 first")
    kind: Literal["event"]
    at: float
    state: State
    detail: str | None


class Notification(_Out):
    """One target of the job file's `notify:`: whether the job's end was announced there."""

    id: str = Field(description="the job id and the target's place in notify: JOB/notify/0")
    kind: Literal["notification"]
    status: Literal["pending", "sending", "sent", "skipped", "failed"] = Field(
        description="pending: not yet (or tried again after a wait); skipped: the job ended"
        " in a state the target does not ask about; failed: given up after the last try"
    )
    state: State | None = Field(description="the end announced (or to announce)")
    tries: int
    error: str | None = Field(description="why the last try failed (never the URL)")
    sent_at: float | None
    by: Literal["supervisor", "job", "command"] | None = Field(
        description="who sent it: a local job's supervisor, the job itself (Slurm), or a"
        " command that polled it"
    )


class AttemptDiagnosis(_Out):
    """Part of an attempt, not an object of its own: what diagnosis said of its end."""

    code: str = Field(description="the failure class, as `diagnose` names it")
    err_class: str
    retryable: bool
    cause: str
    suggestion: str
    node: str | None = Field(description="the host the failure was pinned on, if any")


class Attempt(_Out):
    """One run of a job on its backend: the first, a resubmission, a requeue, or the
    next try of its retry policy."""

    id: str = Field(description="the job id and the attempt's number: JOB#1 first")
    kind: Literal["attempt"]
    attempt: int = Field(description="its number, as the job saw it in ANYLAUNCH_ATTEMPT")
    native_id: str | None = Field(description="the backend's id for this attempt")
    state: State | None = Field(description="how it ended; null while it runs")
    exit_code: int | None
    started_at: float | None
    ended_at: float | None
    nodes: list[str] = Field(description="the hosts it ran on, where the backend says")
    avoided: list[str] = Field(description="hosts it was kept off (earlier attempts failed there)")
    diagnosis: AttemptDiagnosis | None = Field(
        description="why it ended, recorded when it ended (null while it runs, or when it"
        " ended before its job had a retry policy to decide on)"
    )
    next: str | None = Field(description="why the next attempt was made; null: none was")


class JobStatus(JobSummary):
    """`status JOB`: the summary plus its state history, every attempt and profiling
    reports."""

    events: list[Event]
    attempts: list[Attempt] = Field(description="every attempt, oldest first")
    reports: list[str] | None = Field(
        default=None, description="Nsight Systems reports written so far"
    )
    notifications: list[Notification] | None = Field(
        default=None, description="the job file's notify: targets, each with its announcement"
    )


class Split(_Out):
    """One split of a run: its state (its newest attempt's) and every attempt."""

    id: str = Field(description="the run id and the split's number: RUN/0")
    kind: Literal["split"]
    split_id: int
    state: State
    attempts: list[JobSummary] = Field(
        description="every job submitted for this split, oldest first; each names the"
        " attempt it is (`attempt`), and one that made attempts of its own (its retry"
        " policy, a requeue) lists them under `status JOB`"
    )


class RunStatus(_Out):
    """A run of parallel splits: `status RUN`, `retry RUN --failed`, `run` of a split job."""

    id: str = Field(description="the run id")
    kind: Literal["run"]
    state: State
    backend: BackendName
    splits: list[Split]


class PlanOut(_Out):
    """The exact thing the backend would submit; secrets appear by name only."""

    id: str = Field(description="the job id the plan renders (the same as job_id)")
    kind: Literal["plan"]
    backend: str
    job_id: str
    name: str
    job_dir: str
    nodes: int = Field(description="nodes the job runs on; their logs are nodes 0..nodes-1")
    payload: dict[str, Any] = Field(description="what the backend submits, in its own shape")
    files: dict[str, str] = Field(description="files written before submission: path -> text")
    secret_env: list[str] = Field(description="names of the secret environment variables")
    guesses: list[str] = Field(
        description="what the backend inferred rather than read from the platform"
    )
    code_dir: str | None = Field(
        default=None,
        description="the folder on this machine the job's code comes from (null: the image's)",
    )
    snapshot: bool = Field(
        default=False,
        description="the job runs from a copy of code_dir made at submit in JOB_DIR/snapshot",
    )


class DryRun(_Out):
    """`run --dry-run`: the plan of one job; nothing is recorded."""

    id: None = Field(description=NO_ID)
    kind: Literal["job"]
    dry_run: Literal[True]
    backend: str
    plan: PlanOut


class Check(_Out):
    """One preflight check."""

    id: str = Field(description="the check's name (the same as name)")
    kind: Literal["check"]
    name: str
    status: Literal["ok", "warn", "fail"]
    message: str
    fix: str | None


class Preflight(_Out):
    id: None = Field(description=NO_ID)
    kind: Literal["preflight"]
    checks: list[Check]
    ok: bool = Field(description="false when a check failed (nothing may be submitted)")


class Logs(_Out):
    id: str = Field(description="the job id")
    kind: Literal["logs"]
    node: int | None
    text: str = Field(description="the output; lines of several nodes start with [node N]")
    offset: int = Field(
        description="length of the whole output so far: pass it as `since` to get only what follows"
    )


class Evidence(_Out):
    """One log line that shows the cause."""

    id: str = Field(description="where the line is: SOURCE:LINE")
    kind: Literal["evidence"]
    node: int | None
    rank: int | None
    line: int
    source: str
    text: str
    emitter: str | None = Field(
        description="what printed the line: the program, torchrun, NCCL, the backend ..."
    )


class FirstFailure(_Out):
    """Part of a diagnosis, not an object of its own: no id or kind."""

    rank: int | None
    node: int | None
    where: str | None


class Diagnosis(_Out):
    id: str | None = Field(description="the job id; null for `diagnose --log FILE`")
    kind: Literal["diagnosis"]
    code: str = Field(description="the failure class, e.g. OOM_GPU, NCCL_TIMEOUT, USER_ERROR")
    err_class: str
    retryable: bool
    cause: str
    suggestion: str
    inferred: bool = Field(
        description="from an exit code or signal alone, no line naming the cause"
    )
    evidence: list[Evidence] = Field(description="the log lines that show it")
    first_failure: FirstFailure | None


class ErrorBody(_Out):
    """Part of an error, not an object of its own: no id or kind."""

    code: str = Field(description="machine-readable: CONFIG, USAGE, JOB_NOT_FOUND, PREFLIGHT, ...")
    message: str = Field(description="one line naming what is wrong and the fix")


class Error(_Out):
    """Any command that fails: with --json this is on stdout, and the exit status is 1 or 2."""

    id: None = Field(description=NO_ID)
    kind: Literal["error"]
    error: ErrorBody
    checks: list[Check] | None = Field(default=None, description="the failed preflight checks")


class Shape(_Out):
    id: str = Field(description="the shape id (what lepton.resource_shape takes)")
    kind: Literal["shape"]
    cluster: str | None
    gpu_type: str = Field(
        description="the shape id again: the TAO SDK's name for it, not the GPU model"
    )
    accelerator_type: str | None = Field(description="the GPU model, as the API reports it")
    gpu_count: int
    instance_type: str
    cpu: float | None
    memory_in_mb: int | None
    description: str | None


class Volume(_Out):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    id: str = Field(description="the volume as a mount's `from` names it")
    kind: Literal["volume"]
    name: str | None
    from_path: str | None
    type: str = Field(
        description="Lustre or Filestore when guessed from the name or path (see"
        " type_guessed), else the API's `from` (NFS, LOCAL, REMOTE)"
    )
    type_guessed: bool = Field(
        description="true: the API does not say the filesystem; it was read from the name"
    )
    from_: str = Field(alias="from")
    mount_path: str | None
    node_group_id: str | None


class RankStack(_Out):
    """One rank of a running job and its Python stack."""

    id: str = Field(description="the job id and the rank: JOB/0 (JOB/pid-N without a rank)")
    kind: Literal["rank"]
    rank: int | None = Field(description="the rank (RANK); null: a Python process without one")
    local_rank: int | None
    node: int | None
    pid: int = Field(description="the rank's process id on its node")
    host: str | None = Field(description="the machine the node runs on")
    stack: str | None = Field(description="py-spy's dump of every thread, secrets masked")
    error: str | None = Field(description="why there is no stack (py-spy missing or refused)")


class Stack(_Out):
    """`stack JOB`: the Python stack of every rank, by rank."""

    id: str = Field(description="the job id")
    kind: Literal["stack"]
    node: int | None = Field(description="the node asked for; null: every node")
    ranks: list[RankStack]


class ExecResult(_Out):
    """`exec JOB --json -- CMD`: a command run on one node, its output masked."""

    id: str = Field(description="the job id")
    kind: Literal["exec"]
    node: int
    command: list[str]
    via: str = Field(description="how the command reached the node")
    exit_code: int | None = Field(description="the command's exit status; null: it was stopped")
    timed_out: bool
    stdout: str = Field(description="its standard output (the first MiB), secrets masked")
    stderr: str


class ShellResult(_Out):
    """The MCP `shell` tool: a shell on a node under a pseudo-terminal, fed the input."""

    id: str = Field(description="the job id")
    kind: Literal["shell"]
    node: int
    via: str
    exit_code: int | None = Field(description="the shell's exit status; null: it was stopped")
    timed_out: bool
    output: str = Field(description="what the terminal showed (the first MiB), secrets masked")


class ForwardResult(_Out):
    """`forward JOB PORT --json`: where a node's port is served here."""

    id: str = Field(description="the job id")
    kind: Literal["forward"]
    node: int
    port: int = Field(description="the port on the node")
    local_port: int = Field(description="the port on 127.0.0.1 here")
    url: str
    via: str
    relayed: bool = Field(description="false: the node's port is this machine's own already")
    until: float | None = Field(
        description="seconds since the epoch when the forward stops; null: until Ctrl-C"
    )


# Commands whose output is not one object.
JobList = RootModel[list[JobSummary]]
StepState = Literal[
    "PENDING",
    "RUNNING",
    "SUCCEEDED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "PREEMPTED",
    "UNKNOWN",
    "WAITING",
    "BLOCKED",
    "SKIPPED",
]


class Handoff(_Out):
    """An input of a step that is an earlier step's output, and how it gets there."""

    id: str = Field(description="the consumer's input path (the same as input)")
    kind: Literal["handoff"]
    input: str = Field(description="the consumer's input path")
    step: str = Field(description="the step that writes it")
    output: str = Field(description="the producer's output path")
    uri: str = Field(description="where it lives in S3")
    via: Literal["shared", "s3"] = Field(
        description="shared: read in place on a filesystem both steps see; s3: downloaded"
    )
    filesystem: str | None = Field(description="with via shared: that filesystem")


class WorkflowStep(_Out):
    """One step of a workflow and its state."""

    id: str = Field(description="the step id in the workflow file")
    kind: Literal["step"]
    state: StepState = Field(
        description="a run's state once started; WAITING (needs not done), BLOCKED (a"
        " need failed), SKIPPED (not in this run: --only/--from)"
    )
    backend: BackendName
    needs: list[str]
    run_id: str | None = Field(description="the run holding the step's jobs, once started")
    error: str | None = Field(description="why the step could not be submitted")
    handoffs: list[Handoff]
    splits: list[Split] = Field(description="each split (one for a plain step) and its attempts")


class WorkflowStatus(_Out):
    """A workflow: `status WF`, `run wf.yaml`, `retry WF --failed`, `cancel WF`."""

    id: str = Field(description="the workflow id (wf-...)")
    kind: Literal["workflow"]
    state: Literal["PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "UNKNOWN"]
    name: str
    file: str
    mode: Literal["controller", "manual", "slurm"] = Field(
        description="controller: a detached process advances it; manual: execute_step;"
        " slurm: every step on Slurm, handed over at once with native dependencies"
    )
    controller: bool = Field(description="whether its controller process is alive now")
    needs_controller: bool = Field(
        description="unfinished, advanced by a controller and none is alive: its next step"
        " waits until a command that may start one (status, run, retry; not a --read-only"
        " MCP server) touches it"
    )
    levels: list[list[str]] = Field(description="steps in order; one level's steps run at once")
    steps: list[WorkflowStep]
    created_at: float
    updated_at: float


class WorkflowPlanStep(_Out):
    """One step of a workflow's dry run and its plan."""

    id: str = Field(description="the step id in the workflow file")
    kind: Literal["step"]
    backend: BackendName
    needs: list[str]
    splits: int | None
    runs: bool = Field(description="false: left out by --only/--from")
    handoffs: list[Handoff]
    plan: PlanOut | None = Field(description="the plan (split 0's for a split step)")


class WorkflowDryRun(_Out):
    """`run wf.yaml --dry-run`: every step's plan and the order; nothing recorded."""

    id: None = Field(description="none yet: nothing is recorded by a dry run")
    kind: Literal["workflow"]
    dry_run: Literal[True]
    name: str
    file: str
    levels: list[list[str]]
    order: list[str] = Field(description="the steps this run covers, in order")
    steps: list[WorkflowPlanStep]


Cancelled = RootModel[JobSummary | list[JobSummary] | WorkflowStatus | list[WorkflowStatus]]
RunResult = RootModel[DryRun | JobSummary | RunStatus | WorkflowStatus | WorkflowDryRun]
Submitted = RootModel[JobSummary | RunStatus | WorkflowStatus]
DryRunResult = RootModel[DryRun | WorkflowDryRun]
RetryResult = RootModel[RunStatus | WorkflowStatus]
StatusResult = RootModel[JobStatus | RunStatus | WorkflowStatus]
ShapeTable = RootModel[dict[str, Shape]]
VolumeList = RootModel[list[Volume]]
