"""Slurm's command-line tools (sbatch, squeue, sacct, scancel), run in one place.

Every call goes through `run`, which turns a missing tool or a refusal into one-line
BackendErrors and counts calls, so a benchmark can prove that polling 50 jobs costs one
squeue and at most one sacct. What the tools print is read by `parse`, which runs nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Mapping, Sequence

from anylaunch.backends.slurm import parse
from anylaunch.errors import BackendError

CALLS: Counter[str] = Counter()  # tool name -> calls made by this process
TIMEOUT_S = 60
# A poll waits this long for squeue, then shows the last known states as stale. squeue
# itself retries a refused connection for MessageTimeout-ish seconds (18 s with the
# defaults) before it gives up, and `ps` must not hang on a controller that is down.
POLL_DEADLINE_S = 1.0


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    check: bool = True,
    timeout: float = TIMEOUT_S,
) -> subprocess.CompletedProcess[str]:
    tool = argv[0]
    CALLS[tool] += 1
    if shutil.which(tool, path=(env or os.environ).get("PATH")) is None:
        raise BackendError(
            f"{tool} not found — install the Slurm client tools (slurm-client) or run "
            "where they are; for the local test cluster: scripts/devstack up && source .devstack/env",
            code="SLURM_UNAVAILABLE",
        )
    try:
        proc = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise NoAnswer(
            f"{tool} did not answer in {timeout:g}s — is slurmctld up? (scontrol ping)",
            code="SLURM_UNAVAILABLE",
        ) from None
    if check and proc.returncode != 0:
        message = " ".join((proc.stderr or proc.stdout).split()) or f"exit status {proc.returncode}"
        raise BackendError(f"{tool} failed: {message}", code="SLURM")
    return proc


class NoAnswer(BackendError):
    """A Slurm command that did not answer in time: what it did is not known."""


def squeue(native_ids: Sequence[str], *, timeout: float = TIMEOUT_S) -> dict[str, parse.Row]:
    """Every listed job that slurmctld still knows (finished ones for MinJobAge), one call."""
    if not native_ids:
        return {}
    proc = run(parse.squeue_argv(native_ids), check=False, timeout=timeout)
    if proc.returncode != 0:
        if parse.all_forgotten(proc.stderr):
            return {}  # every listed job is gone from slurmctld: sacct knows the rest
        raise BackendError(f"squeue failed: {' '.join(proc.stderr.split())}", code="SLURM")
    return parse.squeue_rows(proc.stdout)


def sacct(native_ids: Sequence[str], *, timeout: float = TIMEOUT_S) -> dict[str, parse.Row]:
    """The accounting record of each listed job (the newest run of a requeued one)."""
    if not native_ids:
        return {}
    proc = run(parse.sacct_argv(native_ids), check=False, timeout=timeout)
    if proc.returncode != 0:
        raise BackendError(f"sacct failed: {' '.join(proc.stderr.split())}", code="SLURM")
    return parse.sacct_rows(proc.stdout)


def by_comment(*, timeout: float = TIMEOUT_S) -> dict[str, tuple[str, bool]]:
    """Every job slurmctld knows whose comment starts with `anylaunch:`, one squeue call:
    the comment's rest -> (job id, or the array's job id, and whether it is an array)."""
    proc = run(parse.comment_argv(), check=False, timeout=timeout)
    if proc.returncode != 0:
        raise BackendError(f"squeue failed: {' '.join(proc.stderr.split())}", code="SLURM")
    return parse.comment_rows(proc.stdout)
