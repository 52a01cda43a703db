"""The MCP server's tools, as data: name, arguments model, result model, safety hints.

Nothing here imports the MCP SDK, so the schemas can be generated (and `anylaunch schema`
answered) without it. Each tool calls the operation the CLI's command calls (`ops`), and
returns the object that command prints with `--json`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from anylaunch.contract import commands
from anylaunch.contract import inputs as args
from anylaunch.contract import outputs as out
from anylaunch.contract.outputs import DIALECT
from anylaunch.workflow import commands as workflows
from anylaunch.workflow.detect import is_workflow


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    arguments: type[BaseModel]
    result: type[BaseModel]
    call: Callable[[Any], Any]
    # Reading tools are all a `--read-only` server offers.
    reads: bool = True
    # Spends money or stops work: hosts should ask the user before each call.
    destructive: bool = False
    # Talks to clusters and clouds beyond this machine.
    open_world: bool = True

    def input_schema(self) -> dict[str, Any]:
        return self.arguments.model_json_schema()

    @property
    def wrapped(self) -> bool:
        """MCP's structured content is an object: a list result travels as {"result": ...}."""
        return self.result.model_json_schema().get("type") != "object" and not _all_objects(
            self.result
        )

    def output_schema(self) -> dict[str, Any]:
        body = self.result.model_json_schema(by_alias=True)
        if self.wrapped:
            defs = body.pop("$defs", None)
            body = {"type": "object", "properties": {"result": body}, "required": ["result"]}
            if defs:
                body["$defs"] = defs
        elif "anyOf" in body:
            body["type"] = "object"  # one of several objects: still an object at the root
        return body

    def output_schema_document(self) -> dict[str, Any]:
        return {
            "$schema": DIALECT,
            **self.output_schema(),
            "title": f"anylaunch MCP tool {self.name}",
        }

    def structured(self, result: Any) -> dict[str, Any]:
        return {"result": result} if self.wrapped else result


def _all_objects(model: type[BaseModel]) -> bool:
    schema = model.model_json_schema()
    options = schema.get("anyOf")
    if not options:
        return False
    defs = schema.get("$defs", {})
    for option in options:
        ref = option.get("$ref", "")
        target = defs.get(ref.rsplit("/", 1)[-1], option) if ref else option
        if target.get("type") != "object":
            return False
    return True


def _run(a: args.RunArgs) -> Any:
    path = commands.job_path(a)
    if is_workflow(path):  # handed to its controller (or to Slurm): returns at once
        commands.refuse_job_options(a.backend, a.overrides, a.command)
        return workflows.status(workflows.run(path, None, None, check=a.preflight))
    return commands.started(commands.start(a))


def _retry(a: args.RetryArgs) -> Any:
    if workflows.is_workflow_id(a.run_id):
        return workflows.retry(a.run_id)
    view, _submitted = commands.retry_failed(a)
    return view.to_json()


JOB_FILE = (
    " Give the job file as `file` (a path) or as `yaml` (its text, which is saved under"
    " $ANYLAUNCH_HOME/jobfiles/ and recorded as the job's source)."
)

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "dry_run",
        "Show the plan",
        "Render the exact plan a job would submit (sbatch script, Lepton job JSON, SkyPilot"
        " task, local commands) without running anything; for a workflow (a file with"
        " `steps:`), every step's plan and the order." + JOB_FILE,
        args.DryRunArgs,
        out.DryRunResult,
        commands.dry_run,
        open_world=False,
    ),
    ToolSpec(
        "run",
        "Run a job (detached)",
        "Check and submit a job, and return at once with its id (poll it with `wait` or"
        " `status`). On slurm, skypilot or lepton this starts paid work on a cluster or cloud;"
        " on the local backend it runs on this machine. A workflow file (with `steps:`) is"
        " handed to its controller and its graph returned (poll it with `status`)." + JOB_FILE,
        args.RunArgs,
        out.Submitted,
        _run,
        reads=False,
        destructive=True,
    ),
    ToolSpec(
        "preflight",
        "Check a job before running it",
        "Every check for a job before it is submitted: credentials, S3 paths, mounts on the"
        " cluster, ports; each ok, warn or fail with a fix." + JOB_FILE,
        args.PreflightArgs,
        out.Preflight,
        commands.preflight,
    ),
    ToolSpec(
        "ps",
        "List jobs",
        "Recorded jobs, newest first, with their current state.",
        args.PsArgs,
        out.JobList,
        commands.ps,
    ),
    ToolSpec(
        "status",
        "A job's or a run's status",
        "A job's state, exit code and state history; for a run id, each split's attempts;"
        " for a workflow id (wf-...), each step's state, splits and attempts.",
        args.RunOrJobRef,
        out.StatusResult,
        commands.status,
    ),
    ToolSpec(
        "logs",
        "Read a job's output",
        "A job's output: every node (lines prefixed [node N]) or one `node`; the last `tail`"
        " lines; from `since` (the `offset` an earlier call returned) to read only new output.",
        args.LogsArgs,
        out.Logs,
        commands.logs,
    ),
    ToolSpec(
        "wait",
        "Wait for a job",
        f"Wait up to `timeout_s` seconds (at most {args.MAX_WAIT_S}) for a job to end and"
        " return its summary; call again while its state is not terminal.",
        args.WaitArgs,
        out.JobSummary,
        commands.wait,
    ),
    ToolSpec(
        "diagnose",
        "Why a job failed",
        "Why a job failed: class, cause, suggested fix and the evidence lines with their node"
        " and rank. Read it before retrying.",
        args.JobRef,
        out.Diagnosis,
        commands.diagnose,
    ),
    ToolSpec(
        "cancel",
        "Cancel jobs",
        "Stop jobs on their backends and wait until each has stopped. Work in progress is lost.",
        args.CancelArgs,
        out.Cancelled,
        commands.cancel,
        reads=False,
        destructive=True,
    ),
    ToolSpec(
        "retry_failed",
        "Retry a run's failed splits",
        "Resubmit only the failed splits of a run, with the same split ids; returns at once."
        " Starts paid work again on the run's backend: read `diagnose` for each failed split"
        " first. For a workflow id (wf-...): its failed steps and splits, then the steps"
        " after them.",
        args.RetryArgs,
        out.RetryResult,
        _retry,
        reads=False,
        destructive=True,
    ),
    ToolSpec(
        "stack",
        "Python stacks of a running job",
        "The Python stack of every rank of a running job (or of one `node`), by rank, with"
        " py-spy: where each rank is right now. Read it when a job seems hung (no new"
        " output): ranks stuck in the same collective, or one rank elsewhere.",
        args.StackArgs,
        out.Stack,
        commands.stack,
    ),
    ToolSpec(
        "exec",
        "Run a command on a job's node",
        "Run a command (a list: the program and its arguments) on one node of a running"
        " job, in that node's environment and working folder; returns its exit status and"
        " output, secrets masked. It can change the job's files: use it to look (nvidia-smi,"
        " ls, cat), not to steer training.",
        args.ExecArgs,
        out.ExecResult,
        commands.exec_command,
        reads=False,
        destructive=True,
    ),
    ToolSpec(
        "shell",
        "A shell on a job's node",
        "Start a shell on one node of a running job under a pseudo-terminal, type `input`"
        " into it (then end-of-input, which ends the shell) and return what the terminal"
        " showed, secrets masked.",
        args.ShellArgs,
        out.ShellResult,
        commands.shell,
        reads=False,
        destructive=True,
    ),
    ToolSpec(
        "forward",
        "Forward a port of a job's node",
        "Serve a port of one node of a running job (TensorBoard, Jupyter, a metrics page)"
        " on 127.0.0.1 of the machine this server runs on, for `seconds`; returns the URL.",
        args.ForwardArgs,
        out.ForwardResult,
        commands.forward,
        reads=False,
    ),
    ToolSpec(
        "list_resource_shapes",
        "Lepton resource shapes",
        "The DGX Cloud Lepton workspace's resource shapes (what `lepton.resource_shape`"
        " takes), optionally of one node group. Needs LEPTON_WORKSPACE_ID and LEPTON_AUTH_TOKEN.",
        args.NodeGroupArgs,
        out.ShapeTable,
        commands.lepton_shapes,
    ),
    ToolSpec(
        "get_volumes",
        "Lepton volumes",
        "The shared volumes of the Lepton workspace's node groups (what `mounts` can name),"
        " optionally of one node group.",
        args.NodeGroupArgs,
        out.VolumeList,
        commands.lepton_volumes,
    ),
)

BY_NAME = {tool.name: tool for tool in TOOLS}
