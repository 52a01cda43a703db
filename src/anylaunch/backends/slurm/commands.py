"""Slurm's command-line tools (sbatch, squeue, sacct, scancel), run and parsed in one place.

Every call goes through `run`, which turns a missing tool or a refusal into one-line
BackendErrors and counts calls, so a benchmark can prove that polling 50 jobs costs one
squeue and at most one sacct. Output is read in Slurm's parsable forms (`--parsable`,
`-P`, `-O` with a separator) and never from `--json`: 22.05's `sacct --json` reports
exit code 0 for failed jobs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from anylaunch.backends.slurm.states import from_exit_pair, from_wait_status
from anylaunch.errors import BackendError

CALLS: Counter[str] = Counter()  # tool name -> calls made by this process
TIMEOUT_S = 60
# A poll waits this long for squeue, then shows the last known states as stale. squeue
# itself retries a refused connection for MessageTimeout-ish seconds (18 s with the
# defaults) before it gives up, and `ps` must not hang on a controller that is down.
POLL_DEADLINE_S = 1.0

_SQUEUE_FIELDS = ("JobID", "ArrayJobID", "ArrayTaskID", "State", "exit_code", "Reason")


@dataclass(frozen=True)
class Row:
    """One job as squeue or sacct saw it; `exit_code` is already a plain number."""

    native_id: str
    state: str
    exit_code: int | None
    reason: str | None = None


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


def parse_job_id(stdout: str) -> str:
    """`sbatch --parsable` prints `ID` or `ID;CLUSTER`, possibly after warnings."""
    for line in reversed(stdout.strip().splitlines()):
        head = line.strip().split(";", 1)[0]
        if head.isdigit():
            return head
    raise BackendError(f"sbatch printed no job id: {stdout.strip()!r}", code="SLURM")


def squeue(native_ids: Sequence[str], *, timeout: float = TIMEOUT_S) -> dict[str, Row]:
    """Every listed job that slurmctld still knows (finished ones for MinJobAge), one call."""
    if not native_ids:
        return {}
    fields = ",".join(f"{f}:|" for f in _SQUEUE_FIELDS)
    proc = run(
        ["squeue", "--noheader", "--array", "--states=all", "--jobs", ",".join(native_ids),
         "--Format", fields],
        check=False, timeout=timeout,
    )  # fmt: skip
    if proc.returncode != 0:
        if "Invalid job id" in proc.stderr:
            return {}  # every listed job is gone from slurmctld: sacct knows the rest
        raise BackendError(f"squeue failed: {' '.join(proc.stderr.split())}", code="SLURM")
    rows: dict[str, Row] = {}
    for line in proc.stdout.splitlines():
        parts = line.split("|")
        if len(parts) < len(_SQUEUE_FIELDS):
            continue
        job_id, array_job, array_task, state, status, reason = (p.strip() for p in parts[:6])
        native = f"{array_job}_{array_task}" if array_task not in ("", "N/A") else job_id
        code = from_wait_status(int(status)) if status.isdigit() else None
        rows[native] = Row(native, state, code, reason)
    return rows


def sacct(native_ids: Sequence[str], *, timeout: float = TIMEOUT_S) -> dict[str, Row]:
    """The accounting record of each listed job (the newest run of a requeued one)."""
    if not native_ids:
        return {}
    proc = run(
        ["sacct", "--noheader", "--parsable2", "--allocations", "--jobs", ",".join(native_ids),
         "--format", "JobID,State,ExitCode"],
        check=False, timeout=timeout,
    )  # fmt: skip
    if proc.returncode != 0:
        raise BackendError(f"sacct failed: {' '.join(proc.stderr.split())}", code="SLURM")
    rows: dict[str, Row] = {}
    for line in proc.stdout.splitlines():
        parts = line.split("|")
        if len(parts) < 3:
            continue
        rows[parts[0]] = Row(parts[0], parts[1], from_exit_pair(parts[2]))
    return rows


def by_comment(prefix: str = "anylaunch:") -> dict[str, tuple[str, bool]]:
    """Every job slurmctld knows whose comment starts with `prefix`, one squeue call:
    the comment's rest -> (job id, or the array's job id, and whether it is an array)."""
    proc = run(["squeue", "--noheader", "--states=all", "--format", "%A|%F|%K|%k"], check=False)
    if proc.returncode != 0:
        raise BackendError(f"squeue failed: {' '.join(proc.stderr.split())}", code="SLURM")
    found: dict[str, tuple[str, bool]] = {}
    for line in proc.stdout.splitlines():
        parts = line.strip().split("|", 3)
        if len(parts) == 4 and parts[3].startswith(prefix):
            job_id, array_job, task, comment = parts
            is_array = task.strip() not in ("", "N/A")
            found.setdefault(comment[len(prefix) :], (array_job if is_array else job_id, is_array))
    return found
