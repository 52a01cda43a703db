"""Workflows: steps with dependencies and data handoff, on every backend.

wf = anylaunch.workflow.load("wf.yaml")
run = wf.run()                     # returns once the controller has it
run.status(); run.retry_failed()
job_id = execute_step(wf, "eval", extra_args={"split_id": 2})   # one split, at once
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from anylaunch.workflow.model import Workflow

__all__ = ["WorkflowRun", "execute_step", "get", "load", "start"]


def load(path: str, environ: Any = None) -> Workflow:
    """Read and check a workflow file (a job file with `steps:`)."""
    from anylaunch.workflow.loader import load as _load

    return _load(path, environ)


def __getattr__(name: str) -> Any:
    if name in ("execute_step", "get", "start", "WorkflowRun"):
        from anylaunch.workflow import api

        return getattr(api, name)
    raise AttributeError(name)
