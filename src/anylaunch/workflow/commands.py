"""The workflow commands as operations: what `run`, `status`, `retry` and `cancel` print
with `--json` for a workflow (the CLI and the MCP server share these)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from anylaunch.store import Store
from anylaunch.workflow import api
from anylaunch.workflow.detect import is_workflow_id as is_workflow_id  # asked here too


def dry_run(file: str, only: str | None, start: str | None) -> dict[str, Any]:
    from anylaunch.workflow import dryrun, load

    workflow = load(file)
    return dryrun.plans(workflow, workflow.select(only, start))


def describe(file: str, only: str | None, start: str | None) -> str:
    from anylaunch.workflow import dryrun, load

    workflow = load(file)
    return dryrun.describe(workflow, workflow.select(only, start))


def run(file: str, only: str | None, start: str | None, *, check: bool = True) -> str:
    from anylaunch.workflow import load

    return api.start(load(file), only=only, start=start, check=check).id


def status(workflow_id: str) -> dict[str, Any]:
    """The graph; an unfinished workflow with no live controller is resumed."""
    return api.get(workflow_id).status()


def retry(workflow_id: str, note: Callable[[str], None] | None = None) -> dict[str, Any]:
    run = api.get(workflow_id)
    if note is not None:  # why each failed, before it is sent again (as `retry RUN`)
        from anylaunch import api as jobs

        for step in run.view().steps.values():
            for split_id in step.failed_splits():
                attempt = step.splits[split_id][-1]
                found = jobs.get(attempt.id).diagnose()
                where = f"split {split_id} " if step.split_count else ""
                note(f"step {step.id} {where}(job {attempt.id}): {found.code}: {found.cause}")
    done = run.retry_failed()
    if note is not None:
        if not done:
            note(f"workflow {run.id}: no failed step to retry")
        for sid, split_ids in done.items():
            which = f" splits {split_ids}" if split_ids else ""
            note(f"workflow {run.id}: step {sid}{which} resubmitted")
    return run.status()


def cancel(workflow_id: str) -> dict[str, Any]:
    return api.get(workflow_id).cancel()


def lines(summary: dict[str, Any]) -> list[str]:
    """`status WF` for people: the graph in order, each step's state, splits, attempts."""
    out = [f"workflow {summary['id']} {summary['state']} ({summary['name']}, {summary['file']})"]
    for step in summary["steps"]:
        needs = f"  needs {', '.join(step['needs'])}" if step["needs"] else ""
        out.append(f"  {step['id']}: {step['state']} ({step['backend']}){needs}")
        if step["error"]:
            out.append(f"    error: {step['error']}")
        for split in step["splits"]:
            tries = ", ".join(f"{a['id']} {a['state']}" for a in split["attempts"])
            label = f"split {split['split_id']}" if len(step["splits"]) > 1 else "job"
            out.append(f"    {label}: {split['state']}  [{tries}]")
    return out


def wait(workflow_id: str, on_change: Callable[[str], None] | None, poll_s: float = 2.0) -> str:
    """Follow a workflow to its end, printing each step's changes; its final state."""
    return api.get(workflow_id, Store()).wait(poll_interval=poll_s, on_change=on_change)
