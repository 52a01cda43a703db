"""Workflows: steps with dependencies and data handoff, on every backend.

wf = anylaunch.workflow.load("wf.yaml")     # plain data: the steps, checked
run = anylaunch.workflow.start(wf)          # returns once it is handed over
run.status(); run.retry_failed()
job_id = execute_step(wf, "eval", extra_args={"split_id": 2})   # one split, at once
"""

from __future__ import annotations

from anylaunch.workflow.api import WorkflowRun, execute_step, get, start
from anylaunch.workflow.loader import load

__all__ = ["WorkflowRun", "execute_step", "get", "load", "start"]
