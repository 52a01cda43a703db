"""A workflow whose steps (the part being run) all run on Slurm: handed to Slurm whole,
each step waiting on the steps it needs with `--dependency=afterok`
(`anylaunch.backends.slurm.chain`). No controller process: once `submit` returns, the
submitting machine may go away and the graph still runs to its end.

Step rows are written as a controlled workflow's are (just before a step's first jobs
are recorded), so `status`, `cancel` and the dashboard read both kinds alike. A command
that finds such a workflow with steps not yet handed over (its submitter died midway)
finishes the submission (`resume`), never submitting a step twice.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from anylaunch.errors import AnylaunchError
from anylaunch.state import State
from anylaunch.store import Store, WorkflowRecord, busy_elsewhere
from anylaunch.workflow import record as wfrecord

if TYPE_CHECKING:
    from anylaunch.backends.slurm import chain
    from anylaunch.jobfile.spec import JobSpec
    from anylaunch.workflow.model import Workflow

BACKEND = "slurm"
DESCRIPTION = (
    "every step on Slurm: submitted at once, each waiting on the steps it needs with"
    " --dependency=afterok (<step> below: that step's Slurm job id); no controller"
)


def applies(workflow: Workflow, selected: list[str]) -> bool:
    """Whether every step being run is on Slurm."""
    return all(workflow.steps[sid].backend == BACKEND for sid in selected)


def placeholder_dependency(spec: JobSpec, needs: list[str]) -> JobSpec:
    """The spec as `--dry-run` shows it: the Slurm ids of the steps it needs are not
    known before they are submitted, so each stands as `<step>`."""
    from anylaunch.backends.slurm import chain

    return chain.with_dependency(spec, [f"<{n}>" for n in needs])


def steps(record: WorkflowRecord) -> list[chain.Step]:
    """The steps being run, as the chain submits them; a need outside the part being
    run counts as done (its outputs are read where they are)."""
    from anylaunch.backends.slurm import chain

    selected = record.doc["selected"]
    return [
        chain.Step(
            sid,
            wfrecord.spec_of(record, sid),
            wfrecord.run_id(record.id, sid),
            tuple(n for n in record.doc["steps"][sid]["needs"] if n in selected),
        )
        for sid in wfrecord.order(record)
        if sid in selected
    ]


def submit(workflow_id: str, store: Store) -> None:
    """Hand every step to Slurm at once (the quick checks ran before it was recorded)."""
    from anylaunch.backends.slurm import chain

    record = store.get_workflow(workflow_id)
    if record.cancel_requested_at:
        return
    with contextlib.suppress(_Cancelled):  # the steps left are not started
        chain.submit(steps(record), store, on_start=_row(record, store), check=False)
    if store.get_workflow(record.id).cancel_requested_at:
        # `cancel` ran while steps were being handed over: it may not have seen the
        # last ones, so they are cancelled here.
        from anylaunch.workflow import engine

        engine.cancel(record.id, store)
        return
    store.set_workflow_state(record.id, State.RUNNING.value)


def resume(workflow_id: str, store: Store) -> bool:
    """Finish a submission its process did not (a crash, a kill midway): True if there
    was something to hand over. Cheap when there is not: the store alone tells."""
    record = store.get_workflow(workflow_id)
    if record.cancel_requested_at or not _unfinished(record, store):
        return False
    try:
        submit(record.id, store)
    except AnylaunchError:
        # Slurm did not answer, or a secret is not in this shell: `status` still shows
        # the graph; the next command (`run` of the file, `retry`) says what is wrong.
        return False
    return True


def retry_failed(workflow_id: str, store: Store) -> dict[str, list[int]]:
    """Rerun the failed steps or splits and the steps after them, each waiting on the
    new jobs of the steps it needs; a step that succeeded never runs again."""
    from anylaunch.backends.slurm import chain

    record = store.get_workflow(workflow_id)
    if record.cancel_requested_at:
        store.clear_cancel_workflow(record.id)
    done = chain.retry_failed(steps(record), store, on_start=_row(record, store))
    store.set_workflow_state(record.id, State.RUNNING.value)
    return done


class _Cancelled(Exception):
    """The workflow was cancelled while its steps were being handed over."""


def _row(record: WorkflowRecord, store: Store) -> chain.OnStart:
    def write(step: chain.Step) -> None:
        if store.get_workflow(record.id).cancel_requested_at:
            raise _Cancelled  # start no more steps
        store.claim_step(record.id, step.id, step.run_id)  # already there after a crash

    return write


def _unfinished(record: WorkflowRecord, store: Store) -> bool:
    """A step not handed over that could be now (nothing it needs failed), or a job
    recorded and never sent whose submitter is gone."""
    from anylaunch.backends.slurm import chain

    selected = record.doc["selected"]
    jobs = {sid: store.list(limit=None, run_id=wfrecord.run_id(record.id, sid)) for sid in selected}
    for sid in selected:
        if not jobs[sid]:
            needs = [n for n in record.doc["steps"][sid]["needs"] if n in selected]
            if not chain.gate(needs, jobs).blocked:
                return True
        for job in jobs[sid]:
            unsent = job.native_id is None and (not job.state.terminal or "submitter" in job.meta)
            if unsent and not busy_elsewhere(job.meta.get("submitter")):
                return True
    return False
