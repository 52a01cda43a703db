"""Slurm's job states and exit codes in anylaunch's vocabulary (`State`).

squeue and sacct spell states long (`TIMEOUT`) or short (`TO`); both are accepted. A job
that Slurm will run again (preempted or on a failed node while `--requeue` is on, or
explicitly requeued) is not finished: reporting PREEMPTED there would make the store
final while Slurm is about to restart the job.
"""

from __future__ import annotations

from anylaunch.state import State

_SHORT = {
    "PD": "PENDING",
    "CF": "CONFIGURING",
    "R": "RUNNING",
    "CG": "COMPLETING",
    "CD": "COMPLETED",
    "F": "FAILED",
    "TO": "TIMEOUT",
    "PR": "PREEMPTED",
    "NF": "NODE_FAIL",
    "OOM": "OUT_OF_MEMORY",
    "CA": "CANCELLED",
    "BF": "BOOT_FAIL",
    "DL": "DEADLINE",
    "RQ": "REQUEUED",
    "RH": "REQUEUE_HOLD",
    "RF": "REQUEUE_FED",
    "RS": "RESIZING",
    "RV": "REVOKED",
    "RD": "RESV_DEL_HOLD",
    "S": "SUSPENDED",
    "ST": "STOPPED",
    "SE": "SPECIAL_EXIT",
    "SI": "SIGNALING",
    "SO": "STAGE_OUT",
}

_MAP = {
    "PENDING": State.PENDING,
    "REQUEUED": State.PENDING,
    "REQUEUE_HOLD": State.PENDING,
    "REQUEUE_FED": State.PENDING,
    "RESV_DEL_HOLD": State.PENDING,
    "SPECIAL_EXIT": State.PENDING,  # held by Slurm after an exit code it was told to hold on
    "CONFIGURING": State.STARTING,  # nodes booting or prolog running
    "RUNNING": State.RUNNING,
    "COMPLETING": State.RUNNING,  # epilogs run; the final state is not known yet
    "RESIZING": State.RUNNING,
    "SUSPENDED": State.RUNNING,
    "STOPPED": State.RUNNING,
    "SIGNALING": State.RUNNING,
    "STAGE_OUT": State.RUNNING,
    "COMPLETED": State.SUCCEEDED,
    "FAILED": State.FAILED,
    "OUT_OF_MEMORY": State.FAILED,
    "BOOT_FAIL": State.FAILED,
    "NODE_FAIL": State.FAILED,
    "TIMEOUT": State.TIMEOUT,
    "DEADLINE": State.TIMEOUT,  # ended at its --deadline: a time limit, not a fault
    "PREEMPTED": State.PREEMPTED,
    "CANCELLED": State.CANCELLED,
    "REVOKED": State.CANCELLED,  # a federated sibling ran it elsewhere
}

# Slurm requeues a job in these states when the job allows requeueing.
_REQUEUED_BY_SLURM = frozenset({"PREEMPTED", "NODE_FAIL"})

_DETAIL = {
    "OUT_OF_MEMORY": "Slurm killed the job for exceeding its memory (OUT_OF_MEMORY)",
    "NODE_FAIL": "a node of the job failed (NODE_FAIL)",
    "BOOT_FAIL": "a node failed to boot (BOOT_FAIL)",
    "DEADLINE": "the job reached its --deadline (DEADLINE)",
    "TIMEOUT": "Slurm killed the job at its time limit (TIMEOUT)",
    "PREEMPTED": "Slurm preempted the job (PREEMPTED)",
    "SUSPENDED": "suspended by Slurm",
    "REQUEUED": "requeued by Slurm",
    "SPECIAL_EXIT": "held by Slurm (SPECIAL_EXIT)",
}


def long_name(code: str) -> str:
    """`TO` -> `TIMEOUT`; sacct's `CANCELLED by 1000` -> `CANCELLED`."""
    word = code.strip().split(" ", 1)[0].rstrip("+").upper()
    return _SHORT.get(word, word)


def to_state(code: str, *, requeue: bool) -> State:
    """anylaunch's state for a Slurm state; unknown spellings are UNKNOWN, never a guess."""
    name = long_name(code)
    if requeue and name in _REQUEUED_BY_SLURM:
        return State.PENDING
    return _MAP.get(name, State.UNKNOWN)


def detail(code: str, reason: str | None = None, *, requeue: bool = False) -> str | None:
    """A short explanation for the store: the Slurm state where ours loses information."""
    name = long_name(code)
    if requeue and name in _REQUEUED_BY_SLURM:
        return f"{name.lower().replace('_', ' ')}; Slurm requeues the job"
    text = _DETAIL.get(name)
    if name == "PENDING" and reason and reason not in ("None", "(null)"):
        return f"pending: {reason}"
    if name == "FAILED" and reason and reason not in ("None", "NonZeroExitCode", "(null)"):
        return f"failed: {reason}"
    return text


def from_wait_status(status: int) -> int:
    """squeue's `exit_code` is a wait(2) status: 768 is exit 3; 9 is killed by SIGKILL."""
    signal = status & 0x7F
    return 128 + signal if signal else (status >> 8) & 0xFF


def from_exit_pair(text: str) -> int | None:
    """sacct's `ExitCode` is `code:signal`; a signal reads as 128 + signal, like a shell."""
    code, _, signal = text.partition(":")
    try:
        code_i, signal_i = int(code), int(signal or 0)
    except ValueError:
        return None
    return 128 + signal_i if signal_i else code_i
