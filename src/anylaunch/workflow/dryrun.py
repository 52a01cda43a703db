"""`run wf.yaml --dry-run`: every step's plan and the order, with no side effects."""

from __future__ import annotations

from typing import Any

from anylaunch import api
from anylaunch.errors import ConfigError
from anylaunch.workflow.loader import in_step
from anylaunch.workflow.model import Workflow


def plans(workflow: Workflow, selected: list[str]) -> dict[str, Any]:
    """The object `--dry-run --json` prints; a split step shows split 0's plan."""
    from anylaunch.launch.splits import with_split
    from anylaunch.workflow import native

    steps = []
    for sid in workflow.order():
        step = workflow.steps[sid]
        spec = step.spec if step.splits is None else with_split(step.spec, 0)
        if native.applies(workflow, selected):
            spec = native.placeholder_dependency(spec, [n for n in step.needs if n in selected])
        try:
            plan = api.dry_run(spec, step.backend) if sid in selected else None
        except ConfigError as exc:
            raise in_step(exc, sid) from None
        steps.append(
            {
                "id": sid,
                "kind": "step",
                "backend": step.backend,
                "needs": step.needs,
                "splits": step.splits,
                "runs": sid in selected,
                "handoffs": [h.to_json() for h in step.handoffs],
                "plan": plan.to_json() if plan else None,
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
    from anylaunch.backends.base import get_backend
    from anylaunch.workflow import native

    found = plans(workflow, selected)
    lines = [f"workflow {workflow.name} ({workflow.file})"]
    if native.applies(workflow, selected):
        lines.append(native.DESCRIPTION)
    lines.append("order:")
    for index, level in enumerate(workflow.levels(), 1):
        shown = [
            (f"{s} [{workflow.steps[s].splits} splits]" if workflow.steps[s].splits else s)
            + ("" if s in selected else " (skipped)")
            for s in level
        ]
        lines.append(f"  {index}. {' | '.join(shown)}")
    for step in found["steps"]:
        needs = f", needs {', '.join(step['needs'])}" if step["needs"] else ""
        lines.append("")
        lines.append(f"== step {step['id']} ({step['backend']}{needs})")
        for handoff in workflow.steps[step["id"]].handoffs:
            lines.append(f"   input {handoff.describe()}")
        if step["plan"] is None:
            lines.append("   not run: its outputs are read where they are")
            continue
        from anylaunch.backends.plan import Plan

        lines.append(get_backend(step["backend"]).describe(Plan.model_validate(step["plan"])))
    return "\n".join(lines)
