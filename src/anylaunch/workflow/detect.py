"""Telling a workflow from a job, cheaply: commands ask before they import either kind's code.

A workflow file has a top-level `steps:` mapping; a workflow's id starts with `wf-`.
Neither question reads YAML or imports the workflow engine.
"""

from __future__ import annotations

import os
import re

PREFIX = "wf-"
_WORKFLOW_TEXT = re.compile(r"^steps:[ \t]*(?:[{#].*)?$", re.MULTILINE)


def is_workflow_id(text: str) -> bool:
    return text.startswith(PREFIX)


def is_workflow(path: str | os.PathLike[str]) -> bool:
    """Whether a job file is a workflow (a top-level `steps:` mapping); cheap, no YAML."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(1 << 20).decode("utf-8", "replace")
    except OSError:
        return False
    return _WORKFLOW_TEXT.search(head) is not None
