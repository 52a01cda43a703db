"""`ps`, `status`, `logs`, `cancel` and `diagnose`: the commands about jobs already
launched. None of them reads a job file, so none imports pydantic or the job file's
models."""

from __future__ import annotations

from typing import Any

import click

from anylaunch.cli.output import JSON, emit_json, handles_errors, show_workflow
from anylaunch.state import State


@click.command()
@click.option("--all", "-a", "show_all", is_flag=True, help="Every job, not only the newest 50.")
@click.option("--limit", "-n", type=click.IntRange(min=1), default=50, show_default=True)
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice([s.value for s in State], case_sensitive=False),
    help="Only jobs in this state (repeatable).",
)
@click.option("--backend", "-b", help="Only jobs of this backend.")
@JSON
@handles_errors
def ps(
    show_all: bool, limit: int, states: tuple[str, ...], backend: str | None, as_json: bool
) -> None:
    """List jobs, newest first."""
    from anylaunch.contract import commands
    from anylaunch.observe import watch

    wanted = [s.upper() for s in states]
    count = None if show_all else limit
    if as_json:
        emit_json(commands.job_list(count, wanted, backend))
        return
    records = watch.jobs(limit=count, states=[State(s) for s in wanted], backend=backend)
    from anylaunch.cli.tables import jobs_table

    jobs_table(records)


@click.command()
@click.argument("job_id")
@JSON
@handles_errors
def status(job_id: str, as_json: bool) -> None:
    """Show a job's state, exit code and state history — or a run's splits, or a
    workflow's steps (resuming a workflow whose controller died)."""
    from anylaunch.contract import commands
    from anylaunch.workflow.detect import is_workflow_id

    if is_workflow_id(job_id):  # the workflow engine is imported only for a workflow
        from anylaunch.workflow import commands as wf

        show_workflow(wf.status(job_id), as_json)
        return

    summary = commands.job_status(job_id)
    if as_json:
        emit_json(summary)
        return
    if summary.get("kind") == "run":
        click.echo(
            f"run {summary['id']} {summary['state']} ({summary['backend']},"
            f" {len(summary['splits'])} splits)"
        )
        for split in summary["splits"]:
            tries = ", ".join(f"{a['id']} {a['state']}" for a in split["attempts"])
            click.echo(f"  split {split['split_id']}: {split['state']}  [{tries}]")
        return
    from anylaunch.cli.tables import job_detail

    stale = None
    if not State(summary["state"]).terminal:
        from anylaunch.observe.reachability import note
        from anylaunch.store import Store

        stale = note(Store().root, summary["backend"])
    if stale:
        click.echo(f"anylaunch: {stale}", err=True)
        summary = {**summary, "state": f"{summary['state']} (stale)"}
    job_detail(summary)
    for report in summary.get("reports", []):
        click.echo(f"    report  {report}")
    for announced in summary.get("notifications", []):
        click.echo(f"    notify  {_notification(announced)}")


def _notification(note: dict[str, Any]) -> str:
    """One `notify:` target's line: `0: sent by supervisor  FAILED`."""
    target = note["id"].rsplit("/", 1)[1]
    line = f"{target}: {note['status']}"
    if note["by"]:
        line += f" by {note['by']}"
    if note["state"]:
        line += f"  {note['state']}"
    if note["error"] and note["status"] != "sent":
        line += f"  (last try: {note['error']})"
    return line


@click.command()
@click.argument("job_id")
@click.option("--follow", "-f", is_flag=True, help="Keep printing until the job ends.")
@click.option("--tail", "-n", type=int, help="Only the last N lines (per node).")
@click.option("--node", type=int, help="Only this node's log.")
@click.option(
    "--since", type=int, default=0, help="Skip the first N characters (an earlier `offset`)."
)
@JSON
@handles_errors
def logs(
    job_id: str, follow: bool, tail: int | None, node: int | None, since: int, as_json: bool
) -> None:
    """Print a job's output (every node, prefixed `[node N]`, unless --node)."""
    from anylaunch.contract import commands
    from anylaunch.contract.inputs import LogsArgs
    from anylaunch.observe import watch
    from anylaunch.observe.follow import follow as follow_logs

    args = commands.parse(LogsArgs, {"job_id": job_id, "node": node, "tail": tail, "since": since})
    if as_json or since:
        result = commands.logs(args)
        if as_json:
            emit_json(result)
        else:
            click.echo(result["text"], nl=False)
        return
    job = watch.get(job_id)
    if follow:
        for line in follow_logs(job, node=node, tail=tail):
            click.echo(line)
    else:
        click.echo(job.logs(node=node, tail=tail), nl=False)
    from anylaunch.observe.reports import profile_reports

    for report in profile_reports(job.record):  # where the profiles are, after the text
        click.echo(f"anylaunch: nsys report: {report}", err=True)


@click.command()
@click.argument("job_ids", nargs=-1, required=True)
@JSON
@handles_errors
def cancel(job_ids: tuple[str, ...], as_json: bool) -> None:
    """Cancel jobs (or workflows: every step still queued or running); waits until each
    has stopped."""
    from anylaunch.contract import commands
    from anylaunch.contract.inputs import CancelArgs
    from anylaunch.workflow import commands as wf

    if any(wf.is_workflow_id(j) for j in job_ids):
        from anylaunch.errors import UsageError

        if not all(wf.is_workflow_id(j) for j in job_ids):
            raise UsageError("cancel workflows on their own: anylaunch cancel WF")
        found = [wf.cancel(j) for j in job_ids]
        if as_json:
            emit_json(found if len(found) > 1 else found[0])
        else:
            for summary in found:
                click.echo("\n".join(wf.lines(summary)))
        return

    args = commands.parse(CancelArgs, {"job_ids": list(job_ids)})
    results = commands.cancel(args, note=None if as_json else click.echo)
    if as_json:
        emit_json(results)


@click.command()
@click.argument("job_id", required=False)
@click.option(
    "--log", "log_file", type=click.Path(dir_okay=False), help="Diagnose a log file instead."
)
@JSON
@handles_errors
def diagnose(job_id: str | None, log_file: str | None, as_json: bool) -> None:
    """Say why a job failed: class, cause, fix, and the evidence lines (with rank and node)."""
    from anylaunch.errors import UsageError

    if (job_id is None) == (log_file is None):
        raise UsageError(
            "give a JOB or --log FILE — for example: anylaunch diagnose --log slurm-42.out"
        )
    if log_file is not None:
        from anylaunch.observe.diagnose.engine import diagnose_text

        try:
            text = open(log_file, encoding="utf-8", errors="replace").read()  # noqa: SIM115
        except OSError as exc:
            raise UsageError(f"{log_file}: cannot read ({exc.strerror}) — check the path") from None
        result = diagnose_text(text)
    else:
        from anylaunch.observe import watch

        assert job_id is not None  # exactly one of JOB and --log, checked above
        job = watch.get(job_id)
        job_id, result = job.id, job.diagnose()
    if as_json:
        emit_json(result.to_json(job_id))  # the object commands.diagnose returns
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
