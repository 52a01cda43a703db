"""`run`, `retry` and `preflight`: the commands that launch, and wait when asked."""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from anylaunch.cli.output import JSON, emit_json, handles_errors, note, show_workflow, warn_check
from anylaunch.errors import EXIT_USAGE


@click.command(context_settings={"ignore_unknown_options": False})
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.option("--backend", "-b", help="local, slurm, skypilot or lepton (default: from the file).")
@click.option("--dry-run", is_flag=True, help="Print the plan; start nothing.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a key.")
@click.option("--detach", "-d", is_flag=True, help="Return once submitted.")
@click.option("--no-preflight", is_flag=True, help="Skip the checks before submitting.")
@click.option("--only", "only", metavar="STEP", help="A workflow: run only this step.")
@click.option("--from", "start", metavar="STEP", help="A workflow: run this step and after.")
@JSON
@handles_errors
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
    from anylaunch.contract import commands
    from anylaunch.errors import UsageError
    from anylaunch.workflow.detect import is_workflow

    if is_workflow(file):
        commands.refuse_job_options(backend, overrides, command)
        _run_workflow(file, only, start, dry_run, detach, no_preflight, as_json)
        return
    if only or start:
        raise UsageError(f"--only and --from are for workflows; {file} has no 'steps:'")

    given = {"file": file, "backend": backend, "overrides": list(overrides), "command": command}
    if dry_run:
        sets, words = list(overrides), list(command)
        if as_json:
            emit_json(commands.dry_run_file(file, backend, sets, words))
        else:
            resolved, plan = commands.dry_run_job(file, backend, sets, words)
            click.echo(resolved.impl.describe(plan))
        return
    from anylaunch.contract.inputs import RunArgs

    args = commands.parse(RunArgs, {**given, "preflight": not no_preflight})
    job = commands.start(args, warn=None if as_json else warn_check)
    if isinstance(job, str):  # a run of splits
        _finish_run(job, detach=detach, as_json=as_json)
        return
    name = job.backend
    if detach:
        if as_json:
            emit_json(job.record.summary())
        else:
            click.echo(f"submitted {job.id} ({name}, native id {job.record.native_id})")
            click.echo(f"  anylaunch logs {job.id} -f    anylaunch status {job.id}")
        return
    if not as_json:
        click.echo(f"anylaunch: job {job.id} on {name}; logs: anylaunch logs {job.id}", err=True)
    state = _wait(job, stream=not as_json)
    if as_json:
        emit_json(job.record.summary())
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
    from anylaunch.workflow import commands as wf

    if dry_run:
        if as_json:
            emit_json(wf.dry_run(file, only, start))
        else:
            click.echo(wf.describe(file, only, start))
        return
    workflow_id = wf.run(file, only, start, check=not no_preflight)
    if not as_json:
        click.echo(f"anylaunch: workflow {workflow_id}: anylaunch status {workflow_id}", err=True)
    state = None
    if not detach:
        try:
            state = wf.wait(workflow_id, None if as_json else note)
        except KeyboardInterrupt:
            click.echo(f"\nanylaunch: detached; workflow {workflow_id} goes on", err=True)
            sys.exit(130)
    show_workflow(wf.status(workflow_id), as_json)
    if state is not None:
        sys.exit(0 if state == "SUCCEEDED" else 1)


def _finish_run(run_id: str, *, detach: bool, as_json: bool) -> None:
    """Print a run (and wait for it unless detached); exit 0 only if every split succeeded."""
    from anylaunch.observe import runs

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
            if view.ended:
                break
            time.sleep(0.5)
    if as_json:
        emit_json(view.to_json())
    else:
        click.echo(f"run {run_id} {view.state.value}")
        failed = view.failed()
        if failed:
            click.echo(f"  failed splits: {failed} — anylaunch retry {run_id} --failed", err=True)
    if not detach:
        sys.exit(0 if view.state.value == "SUCCEEDED" else 1)


@click.command()
@click.argument("run_id")
@click.option(
    "--failed", "only_failed", is_flag=True, help="Resubmit the failed splits (required)."
)
@click.option("--detach", "-d", is_flag=True, help="Return once resubmitted.")
@JSON
@handles_errors
def retry(run_id: str, only_failed: bool, detach: bool, as_json: bool) -> None:
    """Resubmit a run's failed splits with the same split ids, after showing why each failed."""
    from anylaunch.contract import commands
    from anylaunch.contract.inputs import RetryArgs
    from anylaunch.errors import UsageError

    if not only_failed:
        raise UsageError("say which splits: anylaunch retry RUN --failed")
    from anylaunch.workflow import commands as wf

    if wf.is_workflow_id(run_id):
        summary = wf.retry(run_id, note=None if as_json else note)
        if not detach and summary["state"] not in ("SUCCEEDED", "FAILED", "CANCELLED", "UNKNOWN"):
            state = wf.wait(run_id, None if as_json else note)
            summary = wf.status(run_id)
            show_workflow(summary, as_json)
            sys.exit(0 if state == "SUCCEEDED" else 1)
        show_workflow(summary, as_json)
        return
    args = commands.parse(RetryArgs, {"run_id": run_id})
    view, submitted = commands.retry_failed(args, note=None if as_json else note)
    # Nothing resubmitted: nothing to wait for.
    _finish_run(view.id, detach=detach or not submitted, as_json=as_json)


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--backend", "-b", help="local, slurm, skypilot or lepton (default: from the file).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a key.")
@JSON
@handles_errors
def preflight(file: str, backend: str | None, overrides: tuple[str, ...], as_json: bool) -> None:
    """Check a job before submitting it: credentials, paths, mounts on the cluster, ports.
    Exit status 2 when a check fails."""
    from anylaunch.contract import commands
    from anylaunch.contract.inputs import PreflightArgs

    args = commands.parse(
        PreflightArgs, {"file": file, "backend": backend, "overrides": list(overrides)}
    )
    result = commands.preflight(args)
    if as_json:
        emit_json(result)
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
    from anylaunch.observe.follow import follow

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
