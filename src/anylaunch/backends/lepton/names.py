"""Lepton job names: lowercase, at most 36 characters, unique per anylaunch job.

The anylaunch job id goes into the name, so a name is unique without asking the API,
is known before submission (the plan is pure), and lets a retried create find the job
it may already have made.
"""

from __future__ import annotations

import re

MAX_LEN = 36


def job_name(name: str | None, job_id: str, attempt: int = 1) -> str:
    tail = f"-{job_id}" + (f"-r{attempt}" if attempt > 1 else "")
    base = re.sub(r"[^a-z0-9-]+", "-", (name or "job").lower()).strip("-")
    base = re.sub(r"-{2,}", "-", base)
    if not base or not base[0].isalpha():
        base = f"job-{base}".rstrip("-")
    return base[: MAX_LEN - len(tail)].rstrip("-") + tail


def secret_name(job_id: str, env: str) -> str:
    """The workspace secret that carries env `env` of job `job_id`."""
    return f"anylaunch-{job_id}-" + re.sub(r"[^a-z0-9]+", "-", env.lower()).strip("-")
