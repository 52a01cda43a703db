"""The arguments of each command, as pydantic models.

The CLI builds these from its flags and the MCP server from a tool call's arguments, so
a value is checked by the same rule wherever it comes from, and each MCP tool's input
schema is generated from the model (`Model.model_json_schema()`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from anylaunch.contract.names import BackendName as Backend

StateName = Literal[
    "PENDING", "STARTING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "TIMEOUT",
    "PREEMPTED", "UNKNOWN",
]  # fmt: skip
MAX_ID = 64  # the longest job, run or workflow id an argument may carry
JobId = Annotated[
    str, Field(min_length=1, max_length=MAX_ID, description="a job id (or a unique prefix)")
]
# The longest an agent may block in one `wait` call: a client's request times out long
# before a job ends, so the agent polls with several bounded waits.
MAX_WAIT_S = 300


class _Args(BaseModel):
    # Built on first use: a command validates one of these models, never all of them.
    model_config = ConfigDict(extra="forbid", defer_build=True)


class JobFile(_Args):
    """A job file by path, or its YAML text (written under $ANYLAUNCH_HOME, and recorded)."""

    file: str | None = Field(default=None, description="path of the job file (YAML)")
    yaml: str | None = Field(
        default=None,
        description="the job file's text, instead of a path",
        max_length=1_000_000,
    )
    backend: Backend | None = Field(
        default=None, description="local, slurm, skypilot or lepton (default: from the file)"
    )
    overrides: list[str] = Field(
        default_factory=list, description="KEY=VALUE overrides, as `--set` takes them"
    )

    @model_validator(mode="after")
    def _one_source(self) -> JobFile:
        if (self.file is None) == (self.yaml is None):
            raise ValueError("give either file (a path) or yaml (the job file's text)")
        return self


class DryRunArgs(JobFile):
    command: list[str] = Field(
        default_factory=list, description="replaces the file's command when given"
    )


class RunArgs(DryRunArgs):
    preflight: bool = Field(default=True, description="run the quick checks first")


class PreflightArgs(JobFile):
    pass


class PsArgs(_Args):
    limit: int | None = Field(default=50, ge=1, description="newest N jobs; null for all")
    states: list[StateName] = Field(default_factory=list, description="only jobs in these states")
    backend: Backend | None = Field(default=None, description="only jobs of this backend")


class JobRef(_Args):
    job_id: JobId


class RunOrJobRef(_Args):
    id: str = Field(min_length=1, max_length=MAX_ID, description="a job id or a run id")


class LogsArgs(JobRef):
    node: int | None = Field(default=None, ge=0, description="only this node's log")
    tail: int | None = Field(default=None, ge=0, description="only the last N lines (per node)")
    since: int = Field(
        default=0, ge=0, description="skip what an earlier call returned: its `offset`"
    )


class WaitArgs(JobRef):
    timeout_s: float = Field(
        default=60, gt=0, le=MAX_WAIT_S, description="stop waiting after this many seconds"
    )


class CancelArgs(_Args):
    job_ids: list[JobId] = Field(min_length=1, description="the jobs to cancel")


class RetryArgs(_Args):
    run_id: str = Field(
        min_length=1, max_length=64, description="the run whose failed splits to resubmit"
    )


class NodeGroupArgs(_Args):
    node_group: str | None = Field(
        default=None, description="a Lepton node group id or name (default: all)"
    )


# The longest an agent's command, shell or forward may last in one call.
MAX_LIVE_S = 3600


class StackArgs(JobRef):
    node: int | None = Field(default=None, ge=0, description="only this node's ranks")


class ExecArgs(JobRef):
    node: int = Field(default=0, ge=0, description="the node to run on (0 is the first)")
    command: list[str] = Field(
        min_length=1, description="the program and its arguments, run exactly as given"
    )
    timeout_s: float = Field(
        default=60, gt=0, le=MAX_WAIT_S, description="stop the command after this many seconds"
    )


class ShellArgs(JobRef):
    node: int = Field(default=0, ge=0, description="the node (0 is the first)")
    input: str = Field(
        max_length=100_000,
        description="what is typed into the shell; end-of-input follows, which ends it",
    )
    timeout_s: float = Field(
        default=60, gt=0, le=MAX_WAIT_S, description="stop the shell after this many seconds"
    )


class ForwardArgs(JobRef):
    node: int = Field(default=0, ge=0, description="the node (0 is the first)")
    port: int = Field(ge=1, le=65535, description="the port on the node")
    local_port: int | None = Field(
        default=None, ge=0, le=65535, description="the port here (default: the same; 0: any)"
    )
    seconds: float = Field(
        default=600, gt=0, le=MAX_LIVE_S, description="how long the forward stays open"
    )
