"""How a step's input that is an earlier step's output gets there.

Outputs are S3 URIs; with a shared filesystem they are written there first, at
`<cache_root>/bucket/key`, then uploaded. A consumer that sees the same filesystem (the
same cache root on the same kind of machine) finds the object in that validated cache
and reads it in place: one LIST, no download. Any other consumer downloads it from S3.
"""

from __future__ import annotations

import json
import socket
from typing import TYPE_CHECKING

from anylaunch.jobfile.yamlsrc import KeyPath
from anylaunch.store import home
from anylaunch.workflow.model import S3, SHARED, Handoff

if TYPE_CHECKING:
    from anylaunch.jobfile.spec import JobSpec
    from anylaunch.workflow.model import Workflow


def filesystem(spec: JobSpec, backend: str) -> str | None:
    """The shared filesystem a step's staging cache lives on, or None (none shared)."""
    if backend == "local":
        root = (spec.local.cache_root if spec.local else None) or str(home() / "cache")
        return f"local {socket.gethostname()}:{root}"
    if backend == "slurm":
        cache_root = spec.slurm.cache_root if spec.slurm else None
        # the default cache is the job's own dir
        return f"slurm {cache_root}" if cache_root else None
    if backend == "lepton" and spec.lepton and spec.lepton.mounts:
        first = json.dumps(spec.lepton.mounts[0].model_dump(mode="json"), sort_keys=True)
        return f"lepton {spec.lepton.dedicated_node_group or ''} {first}"
    return None


def resolve(
    workflow: Workflow, sid: str, references: list[tuple[KeyPath, str, str]]
) -> list[Handoff]:
    """The handoffs of step `sid`: each of its inputs that names an earlier output."""
    step = workflow.steps[sid]
    mine = filesystem(step.spec, step.backend)
    out = []
    for path, producer, output in references:
        if len(path) < 4 or path[2] != "inputs":
            continue  # named elsewhere (a command, env): the URI text only
        source = workflow.steps[producer]
        theirs = filesystem(source.spec, source.backend)
        shared = mine is not None and mine == theirs
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
