"""The Python face of workflows: start one, look at it, retry what failed, or drive
steps and splits one at a time (`execute_step`) the way agents do.

    wf = load("wf.yaml")          # a Workflow: plain data
    run = start(wf)               # a WorkflowRun: the recorded workflow, advancing
    run.wait(); run.retry_failed()

How a started workflow is advanced is its `mode`: a detached controller (`controller`),
its caller (`execute_step`), or the backend every step runs on, handed the whole graph
with native dependencies (`native`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from anylaunch.backends.checks import failed
from anylaunch.errors import UsageError
from anylaunch.launch import preflight as checks
from anylaunch.launch.resolve import resolve
from anylaunch.observe import watch
from anylaunch.state import State
from anylaunch.store import Store
from anylaunch.workflow import controller, engine, native
from anylaunch.workflow import record as wfrecord
from anylaunch.workflow.model import Workflow


class WorkflowRun:
    """A recorded workflow: a handle on its row in the store."""

    def __init__(self, workflow_id: str, store: Store | None = None) -> None:
        self._store = store or Store()
        self.id = self._store.get_workflow(workflow_id).id

    def __repr__(self) -> str:
        return f"WorkflowRun(id={self.id!r})"

    def view(self) -> engine.WorkflowView:
        """The graph, polled; an unfinished workflow whose controller died gets a new one."""
        wf = engine.view(self.id, self._store)
        if controller.ensure(self.id, self._store, wf.state) is not None:
            wf.controller_alive = True
        return wf

    def status(self) -> dict[str, Any]:
        return self.view().to_json()

    def state(self) -> str:
        return self.view().state

    def wait(
        self,
        timeout: float | None = None,
        poll_interval: float = 2.0,
        on_change: Callable[[str], None] | None = None,
    ) -> str:
        """Poll until the workflow ends (or `timeout` passes); its last state.
        `on_change` hears a line each time a step's state changes."""
        deadline = None if timeout is None else time.monotonic() + timeout
        seen: dict[str, str] = {}
        while True:
            summary = self.status()
            for step in summary["steps"]:
                if seen.get(step["id"]) != step["state"] and on_change is not None:
                    on_change(f"step {step['id']}: {step['state']}")
                seen[step["id"]] = step["state"]
            state = str(summary["state"])
            if state in engine.ENDED:
                return state
            if deadline is not None and time.monotonic() >= deadline:
                return state
            time.sleep(poll_interval)

    def retry_failed(self) -> dict[str, list[int]]:
        """Rerun the failed steps and splits; the steps after them follow."""
        if wfrecord.chained(self._store.get_workflow(self.id)):
            done = native.retry_failed(self.id, self._store)
        else:
            done = engine.retry_failed(self.id, self._store)
        controller.ensure(self.id, self._store, engine.view(self.id, self._store, poll=False).state)
        return done

    def cancel(self) -> dict[str, Any]:
        return engine.cancel(self.id, self._store).to_json()


def start(
    workflow: Workflow,
    *,
    only: str | None = None,
    start: str | None = None,
    store: Store | None = None,
    check: bool = True,
) -> WorkflowRun:
    """Record the workflow and hand it to a detached controller (to the backend itself,
    with native dependencies, when every step run is on one backend that takes a whole
    graph, as Slurm does); returns at once. The same workflow run again while unfinished
    is resumed, not started twice."""
    store = store or Store()
    selected = workflow.select(only, start)
    if check:
        preflight(workflow, selected)
    mode = native.chain_backend(workflow, selected) or wfrecord.CONTROLLED
    workflow_id = wfrecord.add(workflow, selected, mode, store, keyed=True)
    run = WorkflowRun(workflow_id, store)
    if wfrecord.chained(store.get_workflow(run.id)):
        native.submit(run.id, store)  # the same workflow again: finishes its submission
    else:
        controller.ensure(run.id, store)
    return run


def preflight(workflow: Workflow, selected: list[str]) -> None:
    """Each step's quick checks before anything is recorded; an input that an earlier
    step of this run writes is not there yet, so it is left out of the checks."""
    failures = []
    for sid in selected:
        step = workflow.steps[sid]
        produced = {h.input for h in step.handoffs if h.step in selected}
        spec = step.spec
        if produced:
            kept = {k: v for k, v in spec.inputs.items() if k not in produced}
            spec = spec.model_copy(update={"inputs": kept})
        failures += failed(checks.run(resolve(spec, step.backend)))
    if failures:
        raise checks.PreflightFailed(failures)


def get(workflow_id: str, store: Store | None = None) -> WorkflowRun:
    return WorkflowRun(workflow_id, store)


def execute_step(
    plan: Workflow | WorkflowRun | str,
    step_id: str,
    extra_args: Mapping[str, Any] | None = None,
    *,
    store: Store | None = None,
) -> str:
    """Submit one step, or one split of it (`extra_args={"split_id": i}`), and return
    its job id at once. Nothing advances the other steps: the caller drives them.

    The same split again is the retry: a split whose latest attempt failed gets a new
    attempt; one that is queued, running or succeeded is not submitted again (its job id
    is returned). Poll the ids with `job.status()`, or `LeptonSDK.get_job_status`.
    """
    store = store or Store()
    extra = dict(extra_args or {})
    split_id = extra.pop("split_id", None)
    if extra:
        raise UsageError(f"extra_args: {', '.join(map(str, extra))} not known — only split_id is")
    record = _manual_record(plan, store)
    steps = record.doc["steps"]
    if step_id not in steps:
        raise UsageError(f"no step '{step_id}' — steps: {', '.join(steps)}")
    count = steps[step_id].get("splits")
    if split_id is not None:
        if count is None:
            raise UsageError(f"step {step_id} has no splits — call it without split_id")
        if not isinstance(split_id, int) or not 0 <= split_id < count:
            raise UsageError(f"split_id must be 0..{count - 1} for step {step_id}")
    run_id = wfrecord.run_id(record.id, step_id)
    store.claim_step(record.id, step_id, run_id)
    wanted = [split_id] if split_id is not None else (list(range(count)) if count else [None])
    latest = _latest(run_id, store)
    todo = [
        i
        for i in wanted
        if i not in latest
        or latest[i].state in (State.FAILED, State.TIMEOUT, State.PREEMPTED)
        or latest[i].state is State.CANCELLED
    ]
    if todo:
        splits = None if count is None else [i for i in todo if i is not None]
        engine.submit_step(record, step_id, store, splits)
        latest = _latest(run_id, store)
    return latest[wanted[0]].id


def _latest(run_id: str, store: Store) -> dict[int | None, Any]:
    records = watch.refresh(store.list(limit=None, run_id=run_id), store)
    out: dict[int | None, Any] = {}
    for job in sorted(records, key=lambda r: r.created_at):
        out[job.split_id] = job
    return out


def _manual_record(plan: Workflow | WorkflowRun | str, store: Store) -> Any:
    """The stored workflow `plan` stands for; a loaded file is recorded on first use
    (without a controller) and keeps that record for later calls."""
    if isinstance(plan, WorkflowRun):
        return store.get_workflow(plan.id)
    if isinstance(plan, str):
        return store.get_workflow(plan)
    recorded = plan.recorded_id
    if recorded is None:
        recorded = wfrecord.add(plan, plan.order(), wfrecord.MANUAL, store, keyed=False)
        plan.recorded_id = recorded
    return store.get_workflow(recorded)
