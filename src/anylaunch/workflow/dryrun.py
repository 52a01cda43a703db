"""`run wf.yaml --dry-run`: every step's plan and the order, with no side effects.

Each step's plan is the render of what its submission would send (`pipeline.dry_run`),
from the spec it would submit: handed to a backend whole, a step waits on the steps it
needs, whose native ids are not known yet, so each stands as `<step>`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from anylaunch.backends.base import Backend
from anylaunch.backends.plan import Plan
from anylaunch.errors import ConfigError
from anylaunch.launch import pipeline
from anylaunch.launch.resolve import resolve
from anylaunch.launch.splits import with_split
from anylaunch.store import Store
from anylaunch.workflow import native
from anylaunch.workflow.loader import in_step
from anylaunch.workflow.model import Workflow


@dataclass
class StepPlan:
    """One step's dry run: the backend that would run it and its plan (None: not run)."""

    id: str
    impl: Backend | None = None
    plan: Plan | None = None


def render(workflow: Workflow, selected: list[str]) -> list[StepPlan]:
    """Each step's plan, in order; a split step shows split 0's."""
    chained = native.chain_backend(workflow, selected)
    chain = native.chain(chained) if chained else None
    store = Store()
    out = []
    for sid in workflow.order():
        if sid not in selected:
            out.append(StepPlan(sid))
            continue
        step = workflow.steps[sid]
        spec = step.spec if step.splits is None else with_split(step.spec, 0)
        try:
            if chain is not None:
                spec = chain.with_needs(spec, [f"<{n}>" for n in step.needs if n in selected])
            job = resolve(spec, step.backend)
            out.append(StepPlan(sid, job.impl, pipeline.dry_run(job, store)))
        except ConfigError as exc:
            raise in_step(exc, sid) from None
    return out


def plans(workflow: Workflow, selected: list[str]) -> dict[str, Any]:
    """The object `--dry-run --json` prints; a split step shows split 0's plan."""
    return to_json(workflow, selected, render(workflow, selected))


def to_json(workflow: Workflow, selected: list[str], rendered: list[StepPlan]) -> dict[str, Any]:
    steps = []
    for one in rendered:
        step = workflow.steps[one.id]
        steps.append(
            {
                "id": one.id,
                "kind": "step",
                "backend": step.backend,
                "needs": step.needs,
                "splits": step.splits,
                "runs": one.id in selected,
                "handoffs": [h.to_json() for h in step.handoffs],
                "plan": one.plan.to_json() if one.plan else None,
            }
        )
    return {
        "id": None,
        "kind": "workflow",
        "dry_run": True,
        "name": workflow.name,
        "file": workflow.file,
        "levels": workflow.levels(),
        "order": [s for s in workflow.order() if s in selected],
        "steps": steps,
    }


def describe(workflow: Workflow, selected: list[str]) -> str:
    """The dry run for people: the order (steps on one line may run at once), then each
    step's handoffs and the backend's own rendering of its plan."""
    chained = native.chain_backend(workflow, selected)
    lines = [f"workflow {workflow.name} ({workflow.file})"]
    if chained:
        lines.append(native.chain(chained).describe_chain())
    lines.append("order:")
    for index, level in enumerate(workflow.levels(), 1):
        shown = [
            (f"{s} [{workflow.steps[s].splits} splits]" if workflow.steps[s].splits else s)
            + ("" if s in selected else " (skipped)")
            for s in level
        ]
        lines.append(f"  {index}. {' | '.join(shown)}")
    for one in render(workflow, selected):
        step = workflow.steps[one.id]
        needs = f", needs {', '.join(step.needs)}" if step.needs else ""
        lines.append("")
        lines.append(f"== step {one.id} ({step.backend}{needs})")
        for handoff in step.handoffs:
            lines.append(f"   input {handoff.describe()}")
        if one.impl is None or one.plan is None:
            lines.append("   not run: its outputs are read where they are")
            continue
        lines.append(one.impl.describe(one.plan))
    return "\n".join(lines)
