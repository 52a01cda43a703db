"""A run's state across its splits: what `status RUN` shows and `retry` starts from.

A split may have several attempts: each retry records a new job with the same run id
and split id. The split's state is its newest attempt's; the run succeeded when every
split's newest attempt did.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from anylaunch.errors import JobNotFound
from anylaunch.observe import watch
from anylaunch.state import State
from anylaunch.store import JobRecord, Store

RETRIED_STATES = (State.FAILED, State.TIMEOUT, State.PREEMPTED)


@dataclass
class RunView:
    id: str
    backend: str
    splits: dict[int, list[JobRecord]]  # split id -> attempts, oldest first

    @property
    def state(self) -> State:
        """The run's state; a split UNKNOWN only until a poll finds it (a submit whose
        answer was lost) is still under way, one UNKNOWN for good has ended."""
        return run_state(
            State.PENDING
            if latest.state is State.UNKNOWN and not latest.unknown_for_good
            else latest.state
            for latest in (attempts[-1] for attempts in self.splits.values())
        )

    @property
    def ended(self) -> bool:
        """Whether nothing is left to wait for: every split ended, or cannot be known."""
        return ended(self.state)

    def failed(self) -> list[int]:
        return [i for i, attempts in self.splits.items() if attempts[-1].state in RETRIED_STATES]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": "run",
            "state": self.state.value,
            "backend": self.backend,
            "splits": splits_json(self.id, self.splits),
        }


def splits_json(run_id: str, splits: Mapping[int, list[JobRecord]]) -> list[dict[str, Any]]:
    """Each split's state (its newest attempt's) and every attempt, in split order."""
    return [
        {
            "id": split_ref(run_id, i),
            "kind": "split",
            "split_id": i,
            "state": attempts[-1].state.value,
            "attempts": [a.summary() for a in attempts],
        }
        for i, attempts in sorted(splits.items())
    ]


def split_ref(run_id: str, split_id: int) -> str:
    """A split's id in `--json`: its run's id and its number (`r-1a2b3c4d/0`)."""
    return f"{run_id}/{split_id}"


def run_state(latest: Iterable[State]) -> State:
    """A run's state from the states of its splits' newest attempts (each split once or
    each state once: only which states occur matters).

    A split that failed fails the run. A split UNKNOWN (its end cannot be known) makes a
    run that did not fail UNKNOWN, never SUCCEEDED: and the run has ended, as that split
    has, so nothing waits for it forever.
    """
    seen = set(latest)
    if seen <= {State.SUCCEEDED}:
        return State.SUCCEEDED
    if seen & _LIVE:
        return State.RUNNING if State.RUNNING in seen else State.PENDING
    if seen == {State.CANCELLED}:
        return State.CANCELLED
    if State.UNKNOWN in seen and not seen & _FAILED:
        return State.UNKNOWN
    return State.FAILED


def ended(state: State) -> bool:
    """Whether a run in `state` (from `run_state`) has ended."""
    return state.terminal or state is State.UNKNOWN


_LIVE = frozenset({State.PENDING, State.STARTING, State.RUNNING})
_FAILED = frozenset(RETRIED_STATES)


def load(run_id: str, store: Store | None = None) -> RunView:
    """A run by id or unique prefix, its live splits polled first (one call per backend)."""
    store = store or Store()
    run_id = store.resolve_run(run_id)
    records = watch.refresh(store.list(limit=None, run_id=run_id), store)
    splits: dict[int, list[JobRecord]] = {}
    for record in sorted(records, key=lambda r: r.created_at):
        splits.setdefault(record.split_id if record.split_id is not None else 0, []).append(record)
    if not records:
        raise JobNotFound(f"no run '{run_id}' — list runs with 'anylaunch ps'")
    return RunView(run_id, records[0].backend, splits)
