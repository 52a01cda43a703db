"""A workflow whose steps (the part being run) all run on one backend that takes a whole
graph at once (`ChainSubmission`: on Slurm, each step waits on the steps it needs with
`--dependency=afterok`). No controller process: once `submit` returns, the submitting
machine may go away and the graph still runs to its end. The workflow's `mode` is that
backend's name.

Step rows are written as a controlled workflow's are (just before a step's first jobs
are recorded), so `status`, `cancel` and the dashboard read both kinds alike. A command
that finds such a workflow with steps not yet handed over (its submitter died midway)
finishes the submission (`resume`), never submitting a step twice.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from anylaunch.backends.base import ChainStep, ChainSubmission, OnStart, get_backend
from anylaunch.errors import AnylaunchError, UsageError
from anylaunch.state import State
from anylaunch.store import JobRecord, Store, WorkflowRecord, busy_elsewhere
from anylaunch.workflow import engine
from anylaunch.workflow import record as wfrecord

if TYPE_CHECKING:
    from anylaunch.workflow.model import Workflow


def chain_backend(workflow: Workflow, selected: list[str]) -> str | None:
    """The backend that takes the part being run whole: the one every step of it runs
    on, if that backend hands a graph over with native dependencies; else None."""
    names = {workflow.steps[sid].backend for sid in selected}
    if len(names) != 1:
        return None
    (name,) = names
    return name if isinstance(get_backend(name), ChainSubmission) else None


def chain(backend: str) -> ChainSubmission:
    """The backend called `backend`, as the one a chained workflow was handed to."""
    impl = get_backend(backend)
    if not isinstance(impl, ChainSubmission):
        raise UsageError(f"the {backend} backend no longer takes a whole workflow at once")
    return impl


def steps(record: WorkflowRecord) -> list[ChainStep]:
    """The steps being run, as the backend takes them; a need outside the part being
    run counts as done (its outputs are read where they are)."""
    selected = record.doc["selected"]
    return [
        ChainStep(
            sid,
            wfrecord.spec_of(record, sid),
            wfrecord.run_id(record.id, sid),
            tuple(n for n in record.doc["steps"][sid]["needs"] if n in selected),
        )
        for sid in wfrecord.order(record)
        if sid in selected
    ]


def submit(workflow_id: str, store: Store) -> None:
    """Hand every step to the backend at once (the quick checks ran before it was
    recorded)."""
    record = store.get_workflow(workflow_id)
    backend = wfrecord.chained(record)
    if record.cancel_requested_at or backend is None:
        return
    with contextlib.suppress(_Cancelled):  # the steps left are not started
        chain(backend).submit_chain(steps(record), store, _row(record, store))
    if store.get_workflow(record.id).cancel_requested_at:
        # `cancel` ran while steps were being handed over: it may not have seen the
        # last ones, so they are cancelled here.
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
        # The backend did not answer, or a secret is not in this shell: `status` still
        # shows the graph; the next command (`run` of the file, `retry`) says what is wrong.
        return False
    return True


def retry_failed(workflow_id: str, store: Store) -> dict[str, list[int]]:
    """Rerun the failed steps or splits and the steps after them, each waiting on the
    new jobs of the steps it needs; a step that succeeded never runs again."""
    record = store.get_workflow(workflow_id)
    backend = wfrecord.chained(record)
    if backend is None:
        raise UsageError(f"workflow {record.id} was not handed to a backend whole")
    if record.cancel_requested_at:
        store.clear_cancel_workflow(record.id)
    done = chain(backend).retry_chain(steps(record), store, _row(record, store))
    store.set_workflow_state(record.id, State.RUNNING.value)
    return done


class _Cancelled(Exception):
    """The workflow was cancelled while its steps were being handed over."""


def _row(record: WorkflowRecord, store: Store) -> OnStart:
    def write(step: ChainStep) -> None:
        if store.get_workflow(record.id).cancel_requested_at:
            raise _Cancelled  # start no more steps
        store.claim_step(record.id, step.id, step.run_id)  # already there after a crash

    return write


def _unfinished(record: WorkflowRecord, store: Store) -> bool:
    """A step not handed over that could be now (nothing it needs failed), or a job
    recorded and never sent whose submitter is gone."""
    selected = record.doc["selected"]
    jobs = {sid: store.list(limit=None, run_id=wfrecord.run_id(record.id, sid)) for sid in selected}
    for sid in selected:
        if not jobs[sid]:
            needs = [n for n in record.doc["steps"][sid]["needs"] if n in selected]
            if not any(_failed(jobs[n]) for n in needs):
                return True
        for job in jobs[sid]:
            unsent = job.native_id is None and (not job.state.terminal or "submitter" in job.meta)
            if unsent and not busy_elsewhere(job.meta.get("submitter")):
                return True
    return False


def _failed(jobs: list[JobRecord]) -> bool:
    """Whether a step's newest attempt of some split ended without success."""
    newest: dict[int | None, JobRecord] = {}
    for job in sorted(jobs, key=lambda j: j.created_at):
        newest[job.split_id] = job
    return any(j.state.terminal and j.state is not State.SUCCEEDED for j in newest.values())
