"""Advancing a workflow: what each step's state is, and starting the steps whose needs
are done. One process at a time does this (the controller, or a command acting for it).

Crash consistency, on top of the store's own rules for jobs: before a step's jobs are
recorded, a step row is written (`claim_step`), and only the process holding the
workflow (`claim_controller`) starts steps. So after a crash a step is in one of three
places: no row (never started: start it), a row and no jobs (died before recording
them: start it; nothing was sent), or jobs (the store's reconcile finds those the
backend has and the rest are submitted under the ids they were recorded with).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from anylaunch.errors import AnylaunchError
from anylaunch.launch import pipeline, splits
from anylaunch.launch.resolve import resolve
from anylaunch.observe import watch
from anylaunch.observe.runs import RETRIED_STATES, RunView, splits_json
from anylaunch.state import State
from anylaunch.store import JobRecord, StepRow, Store, WorkflowRecord
from anylaunch.workflow import record as wfrecord

# Step states beyond a run's: not started yet, and why.
WAITING = "WAITING"  # its needs are not done yet
BLOCKED = "BLOCKED"  # a step it needs failed or was cancelled: it waits for a retry
SKIPPED = "SKIPPED"  # not part of this run (--only / --from)
DONE = (State.SUCCEEDED.value, SKIPPED)
# A workflow's final states; UNKNOWN: a step's end cannot be known, and nothing after it runs.
ENDED = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "UNKNOWN"})


@dataclass
class StepView:
    id: str
    backend: str
    needs: list[str]
    state: str
    run_id: str | None = None
    splits: dict[int, list[JobRecord]] = field(default_factory=dict)
    error: str | None = None
    handoffs: list[dict[str, Any]] = field(default_factory=list)
    split_count: int | None = None

    def failed_splits(self) -> list[int]:
        return [i for i, a in self.splits.items() if a and a[-1].state in RETRIED_STATES]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": "step",
            "state": self.state,
            "backend": self.backend,
            "needs": self.needs,
            "run_id": self.run_id,
            "error": self.error,
            "handoffs": self.handoffs,
            "splits": splits_json(self.run_id or "", self.splits),
        }


@dataclass
class WorkflowView:
    record: WorkflowRecord
    steps: dict[str, StepView]
    state: str
    controller_alive: bool = False

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def needs_controller(self) -> bool:
        """Unfinished, advanced by a controller, and none is alive to advance it."""
        mode = self.record.doc.get("mode", wfrecord.CONTROLLED)
        return mode == wfrecord.CONTROLLED and not self.controller_alive and self.state not in ENDED

    def to_json(self) -> dict[str, Any]:
        doc = self.record.doc
        return {
            "id": self.record.id,
            "kind": "workflow",
            "state": self.state,
            "name": self.record.name,
            "file": self.record.file,
            "mode": doc.get("mode", wfrecord.CONTROLLED),
            "controller": self.controller_alive,
            "needs_controller": self.needs_controller,
            "levels": doc["levels"],
            "steps": [self.steps[sid].to_json() for sid in wfrecord.order(self.record)],
            "created_at": self.record.created_at,
            "updated_at": self.record.updated_at,
        }


def view(workflow_id: str, store: Store, *, poll: bool = True) -> WorkflowView:
    """A workflow's graph with each step's state; live jobs are polled first (one call
    per backend) unless `poll` is False."""
    from anylaunch.store import alive

    record = store.get_workflow(workflow_id)
    rows = store.step_rows(record.id)
    jobs: list[JobRecord] = []
    for sid in record.doc["steps"]:
        # By the step's run id, row or not: another submitter (Slurm's dependency
        # chain) records a step's jobs under the same run.
        jobs.extend(store.list(limit=None, run_id=wfrecord.run_id(record.id, sid)))
    if poll:
        jobs = watch.refresh(jobs, store)
    by_run: dict[str, list[JobRecord]] = {}
    for job in sorted(jobs, key=lambda j: j.created_at):
        if job.run_id is not None:
            by_run.setdefault(job.run_id, []).append(job)
    steps: dict[str, StepView] = {}
    for sid in wfrecord.order(record):
        steps[sid] = _step(record, sid, rows.get(sid), by_run, steps)
    state = _state(record, steps)
    if poll and wfrecord.chained(record) and state != record.state:
        # No controller records how a workflow handed to a backend whole went: the
        # state seen is kept, so `run` of the same file after it ended starts a new one.
        store.set_workflow_state(record.id, state)
    return WorkflowView(record, steps, state, alive(record.controller))


def _step(
    record: WorkflowRecord,
    sid: str,
    row: StepRow | None,
    by_run: dict[str, list[JobRecord]],
    earlier: dict[str, StepView],
) -> StepView:
    info = record.doc["steps"][sid]
    step = StepView(
        sid,
        info["backend"],
        info["needs"],
        WAITING,
        # A workflow recorded before handoffs carried id and kind gets them here.
        handoffs=[{"id": h["input"], "kind": "handoff", **h} for h in info.get("handoffs", [])],
        split_count=info.get("splits"),
    )
    if sid not in record.doc["selected"]:
        step.state = SKIPPED
        return step
    run = wfrecord.run_id(record.id, sid)
    if row is not None or by_run.get(run):
        step.run_id, step.error = run, row.error if row else None
        for job in by_run.get(run, []):
            step.splits.setdefault(job.split_id if job.split_id is not None else 0, []).append(job)
        if step.splits:
            step.state = RunView(run, step.backend, step.splits).state.value
            if step.state == State.CANCELLED.value and not step.error:
                step.error = _never_ran(record, step, earlier)
        elif step.error:
            step.state = State.FAILED.value
        else:
            step.state = State.PENDING.value  # being started
        return step
    needs = [earlier[n].state for n in step.needs]
    if record.cancel_requested_at:
        step.state = State.CANCELLED.value
    elif any(s not in DONE and s not in _LIVE_OR_WAITING for s in needs):
        step.state = BLOCKED
    return step


def _never_ran(record: WorkflowRecord, step: StepView, earlier: dict[str, StepView]) -> str | None:
    """Why a step nobody cancelled ended CANCELLED: on Slurm, handed over with the steps
    it needs, slurmctld cancels it once one of those fails."""
    asked = [a for attempts in step.splits.values() for a in attempts if a.cancel_requested_at]
    if record.cancel_requested_at or asked:
        return None
    ended = (State.FAILED.value, State.CANCELLED.value)
    bad = next((n for n in step.needs if n in earlier and earlier[n].state in ended), None)
    if bad is None:
        return None
    return f"never ran: {bad} {earlier[bad].state.lower()}, and Slurm cancelled the steps after it"


_LIVE_OR_WAITING = frozenset({State.PENDING.value, State.RUNNING.value, WAITING})


def _state(record: WorkflowRecord, steps: dict[str, StepView]) -> str:
    states = [s.state for s in steps.values() if s.state != SKIPPED]
    if all(s == State.SUCCEEDED.value for s in states):
        return State.SUCCEEDED.value
    if any(s in _LIVE_OR_WAITING for s in states):
        started = any(s.run_id for s in steps.values())
        return State.RUNNING.value if started else State.PENDING.value
    if record.cancel_requested_at:
        return State.CANCELLED.value
    if State.UNKNOWN.value in states and State.FAILED.value not in states:
        return State.UNKNOWN.value  # never SUCCEEDED on a guess, nor FAILED
    return State.FAILED.value


def ready(wf: WorkflowView) -> list[str]:
    """Steps to start now: waiting, every need done."""
    return [
        s.id
        for s in wf.steps.values()
        if s.state == WAITING
        and s.run_id is None
        and all(wf.steps[n].state in DONE for n in s.needs)
    ]


def advance(workflow_id: str, store: Store) -> WorkflowView:
    """One pass: poll, finish what a crash left half-started, start the ready steps."""
    wf = view(workflow_id, store)
    if not wf.record.cancel_requested_at:
        for step in wf.steps.values():
            if step.run_id is not None and not step.splits and not step.error:
                start(wf.record, step.id, store, claimed=True)  # crashed before recording
            elif step.splits:
                resume_unsent(wf.record, step, store)
        for sid in ready(wf):
            start(wf.record, sid, store)
        wf = view(workflow_id, store, poll=False)
    store.set_workflow_state(wf.id, wf.state)
    return wf


def start(record: WorkflowRecord, sid: str, store: Store, *, claimed: bool = False) -> None:
    """Start a step: its row first (so it is never started twice), then its jobs."""
    run = wfrecord.run_id(record.id, sid)
    if not claimed and not store.claim_step(record.id, sid, run):
        return
    if store.list(limit=1, run_id=run):
        return  # its jobs are recorded (by another submitter): they are the step
    try:
        submit_step(record, sid, store)
    except AnylaunchError as exc:
        if not store.list(limit=1, run_id=run):
            store.set_step_error(record.id, sid, exc.message)


def submit_step(
    record: WorkflowRecord, sid: str, store: Store, split_ids: list[int] | None = None
) -> list[JobRecord]:
    """Record and submit a step's jobs (all its splits, or `split_ids`) in its run: the
    stages of every launch, its quick checks first (what it reads may only now exist)."""
    info = record.doc["steps"][sid]
    job = resolve(wfrecord.spec_of(record, sid), info["backend"])
    run = wfrecord.run_id(record.id, sid)
    if info.get("splits") is None:
        pipeline.check(job)
        return [pipeline.submit(job, store, run_id=run)]
    ids = split_ids if split_ids is not None else list(range(info["splits"]))
    return [split.record for split in splits.launch(job, ids, store=store, run_id=run).jobs]


def resume_unsent(record: WorkflowRecord, step: StepView, store: Store) -> None:
    """Jobs of a step recorded by a process that died before handing them over (and
    that the backend, asked by the last poll, does not have): submit them now, under
    the ids they were recorded with."""
    if step.run_id is None:
        return
    todo = splits.unsent(step.run_id, store)
    todo = [r for r in todo if store.claim(r.id)]
    if not todo:
        return
    info = record.doc["steps"][step.id]
    resolved = resolve(wfrecord.spec_of(record, step.id), info["backend"])
    if info.get("splits") is None:
        for job in todo:
            pipeline.resend(job, resolved, store)
    else:
        splits.resume(step.run_id, resolved, store=store)


def retry_failed(workflow_id: str, store: Store) -> dict[str, list[int]]:
    """Resubmit each failed step's failed splits (a single step: the step), and clear
    refused starts; the steps after them then run as their needs succeed. A step that
    succeeded is never rerun. Returns {step: split ids resubmitted}. (A workflow handed
    to a backend whole is retried by that backend: `native.retry_failed`.)"""
    wf = view(workflow_id, store)
    done: dict[str, list[int]] = {}
    if wf.record.cancel_requested_at:
        store.clear_cancel_workflow(wf.id)
    for step in wf.steps.values():
        if step.state not in (State.FAILED.value, State.CANCELLED.value):
            continue
        if not step.splits:  # refused before any job was recorded: start it afresh
            store.forget_step(wf.id, step.id)
            done[step.id] = []
            continue
        failed = [
            i for i, a in step.splits.items() if a[-1].state in (*RETRIED_STATES, State.CANCELLED)
        ]
        if not failed:
            continue
        single = wf.record.doc["steps"][step.id].get("splits") is None
        store.set_step_error(wf.id, step.id, None)
        submit_step(wf.record, step.id, store, None if single else failed)
        done[step.id] = [] if single else failed
    store.set_workflow_state(wf.id, State.RUNNING.value)
    return done


def cancel(workflow_id: str, store: Store) -> WorkflowView:
    """Stop starting steps, and cancel every job still queued or running."""
    wf = view(workflow_id, store)
    store.request_cancel_workflow(wf.id)
    for step in wf.steps.values():
        for attempts in step.splits.values():
            if not attempts[-1].state.terminal:
                watch.get(attempts[-1].id, store=store).cancel()
    wf = view(workflow_id, store)
    store.set_workflow_state(wf.id, wf.state)
    return wf
