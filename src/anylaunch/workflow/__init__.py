"""Workflows: steps with dependencies and data handoff, on every backend.

wf = anylaunch.workflow.load("wf.yaml")     # plain data: the steps, checked
run = anylaunch.workflow.start(wf)          # returns once it is handed over
run.status(); run.retry_failed()
job_id = execute_step(wf, "eval", extra_args={"split_id": 2})   # one split, at once

The public names are imported on first use: commands that only ask whether a file or
an id is a workflow (`workflow.detect`) must not pay for the job file's models.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["WorkflowRun", "execute_step", "get", "load", "start"]
_HOMES = {
    "WorkflowRun": "anylaunch.workflow.api",
    "execute_step": "anylaunch.workflow.api",
    "get": "anylaunch.workflow.api",
    "start": "anylaunch.workflow.api",
    "load": "anylaunch.workflow.loader",
}

if TYPE_CHECKING:
    from anylaunch.workflow.api import WorkflowRun, execute_step, get, start
    from anylaunch.workflow.loader import load


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'anylaunch.workflow' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
