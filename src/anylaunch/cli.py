"""The `anylaunch` command: a thin layer over `anylaunch.api`.

Only click is imported at start-up; the API, pydantic, backends and rich are imported
inside the commands that need them, so `anylaunch --help` costs little more than Python.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable
from functools import wraps
from typing import TYPE_CHECKING, Any

import click

from anylaunch.errors import EXIT_USAGE, AnylaunchError

if TYPE_CHECKING:
    from anylaunch.contract.inputs import NodeGroupArgs

_JSON = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


def _emit_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, default=str))


def _handles_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Errors become one line (or `{"error": ...}` with --json) and the right exit status."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except AnylaunchError as exc:
            if kwargs.get("as_json"):
                _emit_json(exc.to_json())
            else:
                click.echo(f"anylaunch: error: {exc.message}", err=True)
            sys.exit(exc.exit_status)

    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="anylaunch")
def cli() -> None:
    """Launch GPU training jobs anywhere from one job file: locally with torchrun, on
    Slurm, through SkyPilot, or on DGX Cloud Lepton.

    \b
    anylaunch run train.yaml              run and wait (exit 0 only if it succeeded)
    anylaunch run train.yaml --dry-run    print the exact plan, run nothing
    anylaunch ps                          recent jobs
    anylaunch logs JOB -f                 follow a job's output
    """


@cli.command(context_settings={"ignore_unknown_options": False})
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.option("--backend", "-b", help="local, slurm, skypilot or lepton (default: from the file).")
@click.option("--dry-run", is_flag=True, help="Print the plan; start nothing.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a key.")
@click.option("--detach", "-d", is_flag=True, help="Return once submitted.")
@click.option("--no-preflight", is_flag=True, help="Skip the checks before submitting.")
@click.option("--only", "only", metavar="STEP", help="A workflow: run only this step.")
@click.option("--from", "start", metavar="STEP", help="A workflow: run this step and after.")
@_JSON
@_handles_errors
def run(
    file: str,
    command: tuple[str, ...],
    backend: str | None,
    dry_run: bool,
    overrides: tuple[str, ...],
    detach: bool,
    no_preflight: bool,
    only: str | None,
    start: str | None,
    as_json: bool,
) -> None:
    """Run the job in FILE; after `--`, a COMMAND that replaces the file's command
    (`{config}` in it becomes the path of the recipe without launcher sections).
    A FILE with `steps:` is a workflow: its steps run in dependency order."""
    from anylaunch import ops
    from anylaunch.errors import UsageError
    from anylaunch.workflow.detect import is_workflow

    if is_workflow(file):
        if command or backend or overrides:
            raise UsageError(
                "a workflow takes no --backend, --set or command: write them in its steps"
            )
        _run_workflow(file, only, start, dry_run, detach, no_preflight, as_json)
        return
    if only or start:
        raise UsageError(f"--only and --from are for workflows; {file} has no 'steps:'")

    given = {"file": file, "backend": backend, "overrides": list(overrides), "command": command}
    if dry_run:
        from anylaunch.contract.quick import plain_job_file

        sets, words = list(overrides), list(command)
        if not plain_job_file(file, backend, sets, words):
            _check_with_model("DryRunArgs", given)
        if as_json:
            _emit_json(ops.dry_run_file(file, backend, sets, words))
        else:
            from anylaunch import api
            from anylaunch.backends.base import get_backend
            from anylaunch.config import route

            spec = api.load(file, overrides=sets, command=words or None)
            name = route(spec, backend)
            click.echo(get_backend(name).describe(api.dry_run(spec, name)))
        return
    from anylaunch.contract.inputs import RunArgs

    args = ops.parse(RunArgs, {**given, "preflight": not no_preflight})
    job = ops.start(args, warn=None if as_json else _warn)
    if isinstance(job, str):  # a run of splits
        _finish_run(job, detach=detach, as_json=as_json)
        return
    name = job.backend
    if detach:
        if as_json:
            _emit_json(job.record.summary())
        else:
            click.echo(f"submitted {job.id} ({name}, native id {job.record.native_id})")
            click.echo(f"  anylaunch logs {job.id} -f    anylaunch status {job.id}")
        return
    if not as_json:
        click.echo(f"anylaunch: job {job.id} on {name}; logs: anylaunch logs {job.id}", err=True)
    state = _wait(job, stream=not as_json)
    if as_json:
        _emit_json(job.record.summary())
    else:
        click.echo(
            f"anylaunch: job {job.id} {state.value} (exit code {job.record.exit_code})", err=True
        )
    sys.exit(0 if state.value == "SUCCEEDED" else 1)


def _run_workflow(
    file: str,
    only: str | None,
    start: str | None,
    dry_run: bool,
    detach: bool,
    no_preflight: bool,
    as_json: bool,
) -> None:
    from anylaunch.workflow import ops as wf

    if dry_run:
        if as_json:
            _emit_json(wf.dry_run(file, only, start))
        else:
            click.echo(wf.describe(file, only, start))
        return
    workflow_id = wf.run(file, only, start, check=not no_preflight)
    if not as_json:
        click.echo(f"anylaunch: workflow {workflow_id}: anylaunch status {workflow_id}", err=True)
    state = None
    if not detach:
        try:
            state = wf.wait(workflow_id, None if as_json else _note)
        except KeyboardInterrupt:
            click.echo(f"\nanylaunch: detached; workflow {workflow_id} goes on", err=True)
            sys.exit(130)
    _show_workflow(wf.status(workflow_id), as_json)
    if state is not None:
        sys.exit(0 if state == "SUCCEEDED" else 1)


def _show_workflow(summary: dict[str, Any], as_json: bool) -> None:
    from anylaunch.workflow import ops as wf

    if as_json:
        _emit_json(summary)
    else:
        click.echo("\n".join(wf.lines(summary)))


def _finish_run(run_id: str, *, detach: bool, as_json: bool) -> None:
    """Print a run (and wait for it unless detached); exit 0 only if every split succeeded."""
    from anylaunch import runs

    view = runs.load(run_id)
    if not as_json:
        click.echo(
            f"anylaunch: run {run_id}: {len(view.splits)} splits on {view.backend}", err=True
        )
    if not detach:
        seen: dict[int, str] = {}
        while True:
            view = runs.load(run_id)
            for split_id, attempts in sorted(view.splits.items()):
                latest = attempts[-1]
                if not as_json and seen.get(split_id) != latest.state.value:
                    click.echo(
                        f"split {split_id}: {latest.state.value} (job {latest.id})", err=True
                    )
                seen[split_id] = latest.state.value
            if view.state.terminal:
                break
            time.sleep(0.5)
    if as_json:
        _emit_json(view.to_json())
    else:
        click.echo(f"run {run_id} {view.state.value}")
        failed = view.failed()
        if failed:
            click.echo(f"  failed splits: {failed} — anylaunch retry {run_id} --failed", err=True)
    if not detach:
        sys.exit(0 if view.state.value == "SUCCEEDED" else 1)


@cli.command()
@click.argument("run_id")
@click.option(
    "--failed", "only_failed", is_flag=True, help="Resubmit the failed splits (required)."
)
@click.option("--detach", "-d", is_flag=True, help="Return once resubmitted.")
@_JSON
@_handles_errors
def retry(run_id: str, only_failed: bool, detach: bool, as_json: bool) -> None:
    """Resubmit a run's failed splits with the same split ids, after showing why each failed."""
    from anylaunch import ops
    from anylaunch.contract.inputs import RetryArgs
    from anylaunch.errors import UsageError

    if not only_failed:
        raise UsageError("say which splits: anylaunch retry RUN --failed")
    from anylaunch.workflow import ops as wf

    if wf.is_workflow_id(run_id):
        summary = wf.retry(run_id, note=None if as_json else _note)
        if not detach and summary["state"] not in ("SUCCEEDED", "FAILED", "CANCELLED"):
            state = wf.wait(run_id, None if as_json else _note)
            summary = wf.status(run_id)
            _show_workflow(summary, as_json)
            sys.exit(0 if state == "SUCCEEDED" else 1)
        _show_workflow(summary, as_json)
        return
    args = ops.parse(RetryArgs, {"run_id": run_id})
    view, submitted = ops.retry_failed(args, note=None if as_json else _note)
    # Nothing resubmitted: nothing to wait for.
    _finish_run(view.id, detach=detach or not submitted, as_json=as_json)


def _note(text: str) -> None:
    click.echo(text, err=True)


def _warn(check: Any) -> None:
    fix = f" — {check.fix}" if check.fix else ""
    click.echo(f"anylaunch: warning: {check.name}: {check.message}{fix}", err=True)


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--backend", "-b", help="local, slurm, skypilot or lepton (default: from the file).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a key.")
@_JSON
@_handles_errors
def preflight(file: str, backend: str | None, overrides: tuple[str, ...], as_json: bool) -> None:
    """Check a job before submitting it: credentials, paths, mounts on the cluster, ports.
    Exit status 2 when a check fails."""
    from anylaunch import ops
    from anylaunch.contract.inputs import PreflightArgs

    args = ops.parse(
        PreflightArgs, {"file": file, "backend": backend, "overrides": list(overrides)}
    )
    result = ops.preflight(args)
    if as_json:
        _emit_json(result)
    else:
        mark = {"ok": click.style("ok  ", fg="green"), "warn": click.style("warn", fg="yellow"),
                "fail": click.style("FAIL", fg="red")}  # fmt: skip
        for check in result["checks"]:
            fix = (
                f"\n        fix: {check['fix']}" if check["fix"] and check["status"] != "ok" else ""
            )
            click.echo(f"{mark[check['status']]}  {check['name']}: {check['message']}{fix}")
    if not result["ok"]:
        sys.exit(EXIT_USAGE)


def _wait(job: Any, *, stream: bool) -> Any:
    from anylaunch.backends.base import get_backend
    from anylaunch.logs import follow

    try:
        if stream:
            for line in follow(job):
                click.echo(line)
        return job.wait()
    except KeyboardInterrupt:
        if get_backend(job.backend).capabilities.cancel_on_interrupt:
            click.echo(f"\nanylaunch: interrupted; cancelling {job.id}", err=True)
            return job.cancel()
        click.echo(
            f"\nanylaunch: detached; {job.id} keeps running (anylaunch cancel {job.id})", err=True
        )
        sys.exit(130)


@cli.command()
@click.option("--all", "-a", "show_all", is_flag=True, help="Every job, not only the newest 50.")
@click.option("--limit", "-n", type=int, default=50, show_default=True)
@click.option("--state", "states", multiple=True, help="Only jobs in this state (repeatable).")
@click.option("--backend", "-b", help="Only jobs of this backend.")
@_JSON
@_handles_errors
def ps(
    show_all: bool, limit: int, states: tuple[str, ...], backend: str | None, as_json: bool
) -> None:
    """List jobs, newest first."""
    from anylaunch import api, ops
    from anylaunch.contract.quick import plain_ps

    wanted = [_state(s).value for s in states]
    count = None if show_all else limit
    if not plain_ps(count, wanted, backend):
        _check_with_model("PsArgs", {"limit": count, "states": wanted, "backend": backend})
    if as_json:
        _emit_json(ops.job_list(count, wanted, backend))
        return
    records = api.jobs(limit=count, states=[_state(s) for s in wanted], backend=backend)
    from anylaunch.tables import jobs_table

    jobs_table(records)


def _check_with_model(model: str, data: dict[str, Any]) -> None:
    """Arguments `contract.quick` did not pass plainly go to the command's model, which
    refuses them with its own message (or accepts them). The quick checks spare `ps` and
    `status` importing pydantic, most of what they would cost otherwise."""
    from anylaunch import ops
    from anylaunch.contract import inputs

    ops.parse(getattr(inputs, model), data)


def _state(text: str) -> Any:
    from anylaunch.errors import UsageError
    from anylaunch.state import State

    try:
        return State(text.upper())
    except ValueError:
        known = ", ".join(s.value for s in State)
        raise UsageError(f"unknown state '{text}' — use one of: {known}") from None


@cli.command()
@click.argument("job_id")
@_JSON
@_handles_errors
def status(job_id: str, as_json: bool) -> None:
    """Show a job's state, exit code and state history — or a run's splits, or a
    workflow's steps (resuming a workflow whose controller died)."""
    from anylaunch import ops
    from anylaunch.contract.quick import plain_id
    from anylaunch.workflow.detect import is_workflow_id

    if is_workflow_id(job_id):  # the workflow engine is imported only for a workflow
        from anylaunch.workflow import ops as wf

        _show_workflow(wf.status(job_id), as_json)
        return

    if not plain_id(job_id):
        _check_with_model("RunOrJobRef", {"id": job_id})
    summary = ops.job_status(job_id)
    if as_json:
        _emit_json(summary)
        return
    if "run" in summary:
        click.echo(
            f"run {summary['id']} {summary['state']} ({summary['backend']},"
            f" {len(summary['splits'])} splits)"
        )
        for split in summary["splits"]:
            tries = ", ".join(f"{a['id']} {a['state']}" for a in split["attempts"])
            click.echo(f"  split {split['split_id']}: {split['state']}  [{tries}]")
        return
    from anylaunch.tables import job_detail

    stale = None
    if not _state(summary["state"]).terminal:
        from anylaunch.reach import note
        from anylaunch.store import Store

        stale = note(Store().root, summary["backend"])
    if stale:
        click.echo(f"anylaunch: {stale}", err=True)
        summary = {**summary, "state": f"{summary['state']} (stale)"}
    job_detail(summary)
    for report in summary.get("reports", []):
        click.echo(f"    report  {report}")


@cli.command()
@click.argument("job_id")
@click.option("--follow", "-f", is_flag=True, help="Keep printing until the job ends.")
@click.option("--tail", "-n", type=int, help="Only the last N lines (per node).")
@click.option("--node", type=int, help="Only this node's log.")
@click.option(
    "--since", type=int, default=0, help="Skip the first N characters (an earlier `offset`)."
)
@_JSON
@_handles_errors
def logs(
    job_id: str, follow: bool, tail: int | None, node: int | None, since: int, as_json: bool
) -> None:
    """Print a job's output (every node, prefixed `[node N]`, unless --node)."""
    from anylaunch import api, ops
    from anylaunch.contract.inputs import LogsArgs
    from anylaunch.logs import follow as follow_logs

    args = ops.parse(LogsArgs, {"job_id": job_id, "node": node, "tail": tail, "since": since})
    if as_json or since:
        result = ops.logs(args)
        if as_json:
            _emit_json(result)
        else:
            click.echo(result["text"], nl=False)
        return
    job = api.get(job_id)
    if follow:
        for line in follow_logs(job, node=node, tail=tail):
            click.echo(line)
    else:
        click.echo(job.logs(node=node, tail=tail), nl=False)
    from anylaunch.reports import profile_reports

    for report in profile_reports(job.record):  # where the profiles are, after the text
        click.echo(f"anylaunch: nsys report: {report}", err=True)


@cli.command()
@click.argument("job_ids", nargs=-1, required=True)
@_JSON
@_handles_errors
def cancel(job_ids: tuple[str, ...], as_json: bool) -> None:
    """Cancel jobs (or workflows: every step still queued or running); waits until each
    has stopped."""
    from anylaunch import ops
    from anylaunch.contract.inputs import CancelArgs
    from anylaunch.workflow import ops as wf

    if any(wf.is_workflow_id(j) for j in job_ids):
        from anylaunch.errors import UsageError

        if not all(wf.is_workflow_id(j) for j in job_ids):
            raise UsageError("cancel workflows on their own: anylaunch cancel WF")
        found = [wf.cancel(j) for j in job_ids]
        if as_json:
            _emit_json(found if len(found) > 1 else found[0])
        else:
            for summary in found:
                click.echo("\n".join(wf.lines(summary)))
        return

    args = ops.parse(CancelArgs, {"job_ids": list(job_ids)})
    results = ops.cancel(args, note=None if as_json else click.echo)
    if as_json:
        _emit_json(results)


@cli.command()
@click.option("--port", type=int, default=8471, show_default=True, help="0 picks a free port.")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Another address serves beyond this machine, behind a printed access token.",
)
@_handles_errors
def ui(port: int, host: str) -> None:
    """Serve a web dashboard of jobs and runs until interrupted: live logs, timelines,
    diagnosis, cancel and retry (the same code paths as these commands)."""
    from anylaunch.errors import UsageError

    try:
        from anylaunch.ui.server import serve
    except ImportError as exc:
        raise UsageError(f"the dashboard needs {exc.name} — pip install 'anylaunch[ui]'") from None
    try:
        serve(host=host, port=port)
    except OSError as exc:
        raise UsageError(
            f"ui: cannot serve on {host}:{port}: {exc.strerror} — try --port 0"
        ) from None


@cli.command()
@click.argument("job_id", required=False)
@click.option(
    "--log", "log_file", type=click.Path(dir_okay=False), help="Diagnose a log file instead."
)
@_JSON
@_handles_errors
def diagnose(job_id: str | None, log_file: str | None, as_json: bool) -> None:
    """Say why a job failed: class, cause, fix, and the evidence lines (with rank and node)."""
    from anylaunch.errors import UsageError

    if (job_id is None) == (log_file is None):
        raise UsageError(
            "give a JOB or --log FILE — for example: anylaunch diagnose --log slurm-42.out"
        )
    if log_file is not None:
        from anylaunch.diagnose import diagnose_text

        try:
            text = open(log_file, encoding="utf-8", errors="replace").read()  # noqa: SIM115
        except OSError as exc:
            raise UsageError(f"{log_file}: cannot read ({exc.strerror}) — check the path") from None
        result = diagnose_text(text)
    else:
        from anylaunch import api

        assert job_id is not None  # exactly one of JOB and --log, checked above
        job = api.get(job_id)
        job_id, result = job.id, job.diagnose()
    if as_json:
        _emit_json(result.to_json(job_id))  # the object ops.diagnose returns
        return
    click.echo(
        f"{result.code} ({result.err_class}, {'retryable' if result.retryable else 'not retryable'})"
    )
    click.echo(f"cause:      {result.cause}")
    click.echo(f"suggestion: {result.suggestion}")
    for item in result.evidence:
        where = " ".join(f"{k} {item[k]}" for k in ("node", "rank") if item[k] is not None)
        click.echo(
            f"  {item['source']}:{item['line']} {f'[{where}] ' if where else ''}{item['text']}"
        )


@cli.command()
@click.option(
    "--read-only", is_flag=True, help="Offer only the tools that read (no run, cancel, retry)."
)
@_handles_errors
def mcp(read_only: bool) -> None:
    """Serve anylaunch to a coding agent over stdio (Model Context Protocol).

    \b
    Add it to an agent's MCP configuration, e.g.:
      {"mcpServers": {"anylaunch": {"command": "anylaunch", "args": ["mcp"]}}}
    """
    from anylaunch.errors import UsageError

    try:
        from anylaunch.mcp.server import serve
    except ImportError as exc:
        raise UsageError(
            f"the MCP server needs {exc.name} — pip install 'anylaunch[mcp]'"
        ) from None
    serve(read_only=read_only)


@cli.command()
@click.argument("command", nargs=-1)
@click.option("--list", "show_list", is_flag=True, help="Name every schema.")
@_handles_errors
def schema(command: tuple[str, ...], show_list: bool) -> None:
    """Print the JSON Schema of COMMAND's --json output (`error` for errors, `mcp TOOL` for
    an MCP tool's result)."""
    from anylaunch.contract.schemas import all_schemas, render
    from anylaunch.errors import UsageError

    files = all_schemas()
    names = sorted(name.removesuffix(".json").replace("/", " ") for name in files)
    if show_list:
        click.echo("\n".join(names))
        return
    wanted = " ".join(command)
    key = ("mcp/" + wanted[4:] if wanted.startswith("mcp ") else wanted.replace(" ", "-")) + ".json"
    if key not in files:
        raise UsageError(
            f"no schema for '{wanted}' — use one of: {', '.join(names)}"
            if wanted
            else "name a command — for example: anylaunch schema status"
        )
    click.echo(render(files[key]), nl=False)


@cli.group()
def lepton() -> None:
    """DGX Cloud Lepton workspace: resource shapes and volumes (LEPTON_WORKSPACE_ID,
    LEPTON_AUTH_TOKEN)."""


def _node_group_listing(
    listing: Callable[[NodeGroupArgs], tuple[Any, Iterable[str]]],
) -> click.Command:
    """A `lepton` command listing what the workspace offers, in one node group or all:
    `listing` returns what `--json` prints and the lines printed otherwise."""

    @lepton.command(name=listing.__name__, help=listing.__doc__)
    @click.option("--node-group", help="Only this node group (id or name).")
    @_JSON
    @_handles_errors
    def command(node_group: str | None, as_json: bool) -> None:
        from anylaunch import ops
        from anylaunch.contract.inputs import NodeGroupArgs

        found, lines = listing(ops.parse(NodeGroupArgs, {"node_group": node_group}))
        if as_json:
            _emit_json(found)
            return
        for line in lines:
            click.echo(line)

    return command


@_node_group_listing
def shapes(args: NodeGroupArgs) -> tuple[dict[str, Any], Iterable[str]]:
    """The resource shapes a job can ask for (lepton.resource_shape)."""
    from anylaunch import ops

    table = ops.lepton_shapes(args)
    return table, (
        f"{shape_id}  {shape['gpu_count']}x {shape['instance_type']}  cpu {shape['cpu']}"
        f"  memory {shape['memory_in_mb']} MB  {shape['cluster'] or ''}"
        for shape_id, shape in table.items()
    )


@_node_group_listing
def volumes(args: NodeGroupArgs) -> tuple[list[dict[str, Any]], Iterable[str]]:
    """The shared volumes of the node groups (what mounts can name)."""
    from anylaunch import ops

    found = ops.lepton_volumes(args)
    return found, (
        f"{volume['node_group_id']}  {volume['name']}  {volume['type']}  {volume['from']}"
        f"  -> {volume['mount_path']}"
        for volume in found
    )


def _without_pydantic_plugins() -> None:
    """The CLI's own models run without pydantic plugins, and skip the search for them.

    pydantic looks for plugins when it builds a model's validator, through a module that
    imports importlib.metadata (~10-25 ms) and then scans every installed distribution's
    entry points. No plugin has anything to do with the CLI's job-file and argument
    models. PYDANTIC_DISABLE_PLUGINS would not avoid the import, and set in this process's
    environment it would reach every job started from here, turning off the plugins of
    the user's own program; so this process alone gets a loader that finds none. The
    Python API (`import anylaunch`) leaves pydantic as the caller has it.
    """
    name = "pydantic.plugin._loader"
    if name not in sys.modules:
        import types

        loader = types.ModuleType(name, "anylaunch CLI: no pydantic plugins in this process")
        loader.__dict__["get_plugins"] = lambda: ()
        sys.modules[name] = loader


def main() -> None:
    """Entry point: usage errors exit 2, as the contract says, also with --json."""
    _without_pydantic_plugins()
    try:
        cli.main(standalone_mode=False)
    except click.UsageError as exc:
        if "--json" in sys.argv[1:]:
            from anylaunch.errors import error_json

            _emit_json(error_json("USAGE", exc.format_message()))
        else:
            exc.show()
        sys.exit(EXIT_USAGE)
    except click.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
