"""How a step's input that is an earlier step's output gets there.

Outputs are S3 URIs; with a shared filesystem they are written there first, at
`<cache_root>/bucket/key`, then uploaded. A consumer that sees the same filesystem (its
backend names the same one for both steps: `Backend.shared_filesystem`) finds the object
in that validated cache and reads it in place: one LIST, no download. Any other consumer
downloads it from S3.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from anylaunch.backends.base import get_backend
from anylaunch.jobfile.yamlsrc import KeyPath
from anylaunch.workflow.model import S3, SHARED, Handoff

if TYPE_CHECKING:
    from anylaunch.workflow.model import Step, Workflow


def filesystem(step: Step) -> str | None:
    """The shared filesystem a step's staging cache lives on, or None (none shared)."""
    return get_backend(step.backend).shared_filesystem(step.spec)


def resolve(
    workflow: Workflow, sid: str, references: list[tuple[KeyPath, str, str]]
) -> list[Handoff]:
    """The handoffs of step `sid`: each of its inputs that names an earlier output."""
    step = workflow.steps[sid]
    mine = filesystem(step)
    out = []
    for path, producer, output in references:
        if len(path) < 4 or path[2] != "inputs":
            continue  # named elsewhere (a command, env): the URI text only
        source = workflow.steps[producer]
        shared = mine is not None and mine == filesystem(source)
        out.append(
            Handoff(
                input=str(path[3]),
                step=producer,
                output=output,
                uri=source.spec.outputs[output],
                via=SHARED if shared else S3,
                filesystem=mine if shared else None,
            )
        )
    return out
