"""One state vocabulary for every backend, and the rule that states only move forward.

A stale poll (an old squeue line, a retried HTTP response) must never revive a job that
already finished, so transitions are checked here rather than in each backend.
"""

from __future__ import annotations

from enum import Enum


class State(str, Enum):
    PENDING = "PENDING"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    PREEMPTED = "PREEMPTED"
    UNKNOWN = "UNKNOWN"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL

    def __str__(self) -> str:
        return self.value


TERMINAL = frozenset(
    {State.SUCCEEDED, State.FAILED, State.CANCELLED, State.TIMEOUT, State.PREEMPTED}
)

# Progress order of the live states; every terminal state ranks above them all.
_RANK = {State.PENDING: 0, State.STARTING: 1, State.RUNNING: 2}


def may_move(current: State, new: State) -> bool:
    """Whether a job in `current` may be recorded as `new`.

    UNKNOWN (a backend that could not tell) never overwrites what we know; a terminal
    state is final; live states never move backwards.
    """
    if current.terminal or new is State.UNKNOWN or new is current:
        return False
    if new.terminal or current is State.UNKNOWN:
        return True
    return _RANK[new] >= _RANK[current]


def may_become_unknown(current: State) -> bool:
    """Whether a job may be declared UNKNOWN (`Store.mark_unknown`): any live job may, as
    its submit's answer or its watcher was lost; a terminal one never."""
    return not current.terminal
