"""Slurm's command-line tools (sbatch, squeue, sacct, scancel), run in one place.

Every call goes through `run`, which turns a missing tool or a refusal into one-line
BackendErrors and counts calls, so a benchmark can prove that polling 50 jobs costs one
squeue and at most one sacct. A call `via` a login node runs the same command there over
its shared ssh connection (`login.py`), so a remote cluster is polled, submitted to and
cancelled by the same code. What the tools print is read by `parse`, which runs nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from anylaunch.backends.slurm import parse
from anylaunch.errors import BackendError

if TYPE_CHECKING:
    from anylaunch.backends.slurm.login import Login

CALLS: Counter[str] = Counter()  # tool name -> calls made by this process
TIMEOUT_S = 60
# A poll waits this long for squeue, then shows the last known states as stale. squeue
# itself retries a refused connection for MessageTimeout-ish seconds (18 s with the
# defaults) before it gives up, and `ps` must not hang on a controller that is down.
POLL_DEADLINE_S = 1.0
# Through a login node the deadline holds the network's round trip too.
REMOTE_POLL_DEADLINE_S = 15.0


def poll_deadline(via: Login | None) -> float:
    return POLL_DEADLINE_S if via is None else REMOTE_POLL_DEADLINE_S


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    check: bool = True,
    timeout: float = TIMEOUT_S,
    via: Login | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a Slurm tool here, or `via` a login node. There `env` holds only what the
    command gets beyond the session's environment (the secrets, passed on ssh's stdin)."""
    tool = argv[0]
    CALLS[tool] += 1
    if via is not None:
        return _remote(argv, via, env=env, check=check, timeout=timeout)
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


def _remote(
    argv: Sequence[str],
    via: Login,
    *,
    env: Mapping[str, str] | None,
    check: bool,
    timeout: float,
) -> subprocess.CompletedProcess[str]:
    from anylaunch.backends.slurm import login

    tool = argv[0]
    try:
        done = via.run(argv, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise NoAnswer(
            f"{tool} on {via.text} did not answer in {timeout:g}s — is the login node (and"
            " slurmctld behind it) up?",
            code="SLURM_UNAVAILABLE",
        ) from None
    proc = subprocess.CompletedProcess(
        done.args,
        done.returncode,
        done.stdout.decode(errors="replace"),
        done.stderr.decode(errors="replace"),
    )
    if proc.returncode in (login.SSH_FAILED, login.NOT_FOUND):
        # Not Slurm's answer: ssh failed, or the tool is not there.
        error = Disconnected if proc.returncode == login.SSH_FAILED else BackendError
        raise error(via.failure(proc.returncode, proc.stderr, tool), code="SLURM_UNAVAILABLE")
    if check and proc.returncode != 0:
        message = " ".join((proc.stderr or proc.stdout).split()) or f"exit status {proc.returncode}"
        raise BackendError(f"{tool} failed on {via.text}: {message}", code="SLURM")
    return proc


class NoAnswer(BackendError):
    """A Slurm command that did not answer in time: what it did is not known."""


class Disconnected(BackendError):
    """ssh failed while running a command on the login node: it may have run or not."""


def squeue(
    native_ids: Sequence[str], *, timeout: float = TIMEOUT_S, via: Login | None = None
) -> dict[str, parse.Row]:
    """Every listed job that slurmctld still knows (finished ones for MinJobAge), one call."""
    if not native_ids:
        return {}
    proc = run(parse.squeue_argv(native_ids), check=False, timeout=timeout, via=via)
    if proc.returncode != 0:
        if parse.all_forgotten(proc.stderr):
            return {}  # every listed job is gone from slurmctld: sacct knows the rest
        raise BackendError(f"squeue failed: {' '.join(proc.stderr.split())}", code="SLURM")
    return parse.squeue_rows(proc.stdout)


def sacct(
    native_ids: Sequence[str], *, timeout: float = TIMEOUT_S, via: Login | None = None
) -> dict[str, parse.Row]:
    """The accounting record of each listed job (the newest run of a requeued one)."""
    if not native_ids:
        return {}
    proc = run(parse.sacct_argv(native_ids), check=False, timeout=timeout, via=via)
    if proc.returncode != 0:
        raise BackendError(f"sacct failed: {' '.join(proc.stderr.split())}", code="SLURM")
    return parse.sacct_rows(proc.stdout)


def by_comment(
    *, timeout: float = TIMEOUT_S, via: Login | None = None
) -> dict[str, tuple[str, bool]]:
    """Every job slurmctld knows whose comment starts with `anylaunch:`, one squeue call:
    the comment's rest -> (job id, or the array's job id, and whether it is an array)."""
    proc = run(parse.comment_argv(), check=False, timeout=timeout, via=via)
    if proc.returncode != 0:
        raise BackendError(f"squeue failed: {' '.join(proc.stderr.split())}", code="SLURM")
    return parse.comment_rows(proc.stdout)
