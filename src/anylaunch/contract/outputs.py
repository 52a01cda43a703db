"""The objects `--json` prints and the MCP tools return, as pydantic models.

The builders in `anylaunch.ops` produce plain dicts (so `ps --json` never imports
pydantic); these models only describe them, for the published JSON Schemas and for the
tests that validate real output. Every model forbids unknown keys: a field added to an
output without being added here fails the suite, so a change to the contract is always
a visible diff in docs/schemas/ (regenerate with `python -m anylaunch.contract.schemas`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

from anylaunch.state import State


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class JobSummary(_Out):
    """One job: the stable shape of `run --detach`, `ps` and `cancel`."""

    id: str = Field(description="anylaunch's job id (8 characters)")
    name: str
    state: State
    backend: Literal["local", "slurm", "skypilot", "lepton"]
    native_id: str | None = Field(description="the backend's own id once submitted")
    exit_code: int | None
    detail: str | None = Field(description="the backend's latest word on the job")
    run_id: str | None = Field(description="the run this job is a split of")
    split_id: int | None
    job_dir: str
    created_at: float = Field(description="seconds since the epoch")
    updated_at: float


class Event(_Out):
    at: float
    state: State
    detail: str | None


class JobStatus(JobSummary):
    """`status JOB`: the summary plus its state history and profiling reports."""

    events: list[Event]
    reports: list[str] | None = Field(
        default=None, description="Nsight Systems reports written so far"
    )


class Split(_Out):
    split_id: int
    state: State
    attempts: list[JobSummary] = Field(description="every try, oldest first")


class RunStatus(_Out):
    """A run of parallel splits: `status RUN`, `retry RUN --failed`, `run` of a split job."""

    run: str
    state: State
    backend: Literal["local", "slurm", "skypilot", "lepton"]
    splits: list[Split]


class PlanOut(_Out):
    """The exact thing the backend would submit; secrets appear by name only."""

    backend: str
    job_id: str
    name: str
    job_dir: str
    payload: dict[str, Any] = Field(description="what the backend submits, in its own shape")
    files: dict[str, str] = Field(description="files written before submission: path -> text")
    secret_env: list[str] = Field(description="names of the secret environment variables")


class DryRun(_Out):
    backend: str
    plan: PlanOut


class Check(_Out):
    name: str
    status: Literal["ok", "warn", "fail"]
    message: str
    fix: str | None


class Preflight(_Out):
    checks: list[Check]
    ok: bool = Field(description="false when a check failed (nothing may be submitted)")


class Logs(_Out):
    id: str
    node: int | None
    text: str = Field(description="the output; lines of several nodes start with [node N]")
    offset: int = Field(
        description="length of the whole output so far: pass it as `since` to get only what follows"
    )


class Evidence(_Out):
    node: int | None
    rank: int | None
    line: int
    source: str
    text: str
    emitter: str | None = Field(
        description="what printed the line: the program, torchrun, NCCL, the backend ..."
    )


class FirstFailure(_Out):
    rank: int | None
    node: int | None
    where: str | None


class Diagnosis(_Out):
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
    code: str = Field(description="machine-readable: CONFIG, USAGE, JOB_NOT_FOUND, PREFLIGHT, ...")
    message: str = Field(description="one line naming what is wrong and the fix")


class Error(_Out):
    """Any command that fails: with --json this is on stdout, and the exit status is 1 or 2."""

    error: ErrorBody
    checks: list[Check] | None = Field(default=None, description="the failed preflight checks")


class Shape(_Out):
    cluster: str | None
    gpu_type: str
    gpu_count: int
    instance_type: str
    cpu: float | None
    memory_in_mb: int | None
    description: str | None


class Volume(_Out):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str | None
    from_path: str | None
    type: str
    from_: str = Field(alias="from")
    mount_path: str | None
    node_group_id: str | None


# Commands whose output is not one object.
JobList = RootModel[list[JobSummary]]
Cancelled = RootModel[JobSummary | list[JobSummary]]
RunResult = RootModel[DryRun | JobSummary | RunStatus]
Submitted = RootModel[JobSummary | RunStatus]
StatusResult = RootModel[JobStatus | RunStatus]
ShapeTable = RootModel[dict[str, Shape]]
VolumeList = RootModel[list[Volume]]
