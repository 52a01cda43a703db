"""Workflows: steps with dependencies and data handoff, on every backend.

wf = anylaunch.workflow.load("wf.yaml")
run = wf.run()                     # returns once the controller has it
run.status(); run.retry_failed()
job_id = execute_step(wf, "eval", extra_args={"split_id": 2})   # one split, at once
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from anylaunch.lazy import lazy_exports

if TYPE_CHECKING:
    from anylaunch.workflow.api import WorkflowRun, execute_step, get, start
    from anylaunch.workflow.model import Workflow

__all__ = ["WorkflowRun", "execute_step", "get", "load", "start"]


def load(path: str, environ: Any = None) -> Workflow:
    """Read and check a workflow file (a job file with `steps:`)."""
    from anylaunch.workflow.loader import load as _load

    return _load(path, environ)


__getattr__ = lazy_exports(
    __name__,
    dict.fromkeys(("execute_step", "get", "start", "WorkflowRun"), "anylaunch.workflow.api"),
)
