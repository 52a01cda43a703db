"""A workflow as the store keeps it: each step's job with secrets masked, its backend,
needs and handoffs, and which steps this run covers. The controller, `status`, `retry`
and `execute_step` all work from this, never from the file again (it may have changed)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from anylaunch.store import Store, WorkflowRecord, new_id
from anylaunch.workflow.detect import PREFIX

if TYPE_CHECKING:
    from anylaunch.jobfile.spec import JobSpec
    from anylaunch.workflow.model import Workflow

# How a workflow is advanced (its `mode`): by a controller, by its caller, or — when
# every step run is on one backend that takes a whole graph (`ChainSubmission`) — by
# that backend, whose name is then the mode ("slurm").
CONTROLLED = "controller"  # a detached controller advances it
MANUAL = "manual"  # steps started one by one (execute_step); nothing advances it
PENDING = "PENDING"


def new_workflow_id() -> str:
    """`wf-` and 8 characters: never taken for a job or run id, which have no dash."""
    return PREFIX + new_id()


def run_id(workflow_id: str, step_id: str) -> str:
    """The run that holds a step's jobs: its splits and every attempt."""
    return f"{workflow_id}.{step_id}"


def doc(workflow: Workflow, selected: list[str], mode: str) -> dict[str, Any]:
    return {
        "file": workflow.file,
        "name": workflow.name,
        "mode": mode,
        "selected": selected,
        "levels": workflow.levels(),
        "steps": {
            sid: {
                "backend": step.backend,
                "needs": step.needs,
                "splits": step.splits,
                "spec": step.spec.redacted(),
                "handoffs": [h.to_json() for h in step.handoffs],
            }
            for sid, step in workflow.steps.items()
        },
    }


def key(workflow: Workflow, selected: list[str]) -> str:
    """What makes two `anylaunch run` of a workflow the same: its steps (secrets masked),
    the part run, and the directory it was run from."""
    text = json.dumps(
        {"doc": doc(workflow, selected, CONTROLLED), "cwd": os.getcwd()},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def add(workflow: Workflow, selected: list[str], mode: str, store: Store, *, keyed: bool) -> str:
    """Record the workflow before any step starts; the id of the one recorded (an
    unfinished one of the same key, when `keyed`)."""
    record = WorkflowRecord(
        id=new_workflow_id(),
        name=workflow.name,
        file=workflow.file,
        doc=doc(workflow, selected, mode),
        state=PENDING,
    )
    return store.add_workflow(record, key(workflow, selected) if keyed else None)


def chained(record: WorkflowRecord) -> str | None:
    """The backend a workflow was handed to whole, with native dependencies; None when
    a controller (or its caller) advances it."""
    mode = record.doc.get("mode", CONTROLLED)
    return None if mode in (CONTROLLED, MANUAL) else str(mode)


def order(record: WorkflowRecord) -> list[str]:
    return [sid for level in record.doc["levels"] for sid in level]


def spec_of(
    record: WorkflowRecord, step_id: str, environ: Mapping[str, str] | None = None
) -> JobSpec:
    """A step's job rebuilt from the store, secrets put back from the environment."""
    from anylaunch.jobfile.spec import JobSpec
    from anylaunch.launch.retry import unmask

    data = record.doc["steps"][step_id]["spec"]
    return JobSpec.model_validate(unmask(data, os.environ if environ is None else environ))
