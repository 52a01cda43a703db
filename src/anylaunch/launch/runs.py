"""A run's state across its splits, and `retry RUN --failed`.

A split may have several attempts: each retry records a new job with the same run id
and split id. The split's state is its newest attempt's; the run succeeded when every
split's newest attempt did. Retrying rebuilds each failed split's spec from the store,
where secrets are masked: their values come from the environment again, by name, so a
retry never needed them written down.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from anylaunch.errors import JobNotFound, UsageError
from anylaunch.jobfile.secrets import MASK
from anylaunch.jobfile.spec import JobSpec
from anylaunch.launch import splits as run_splits
from anylaunch.launch.resolve import resolve
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
        return run_state(attempts[-1].state for attempts in self.splits.values())

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
    each state once: only which states occur matters)."""
    seen = set(latest)
    if seen <= {State.SUCCEEDED}:
        return State.SUCCEEDED
    if not all(s.terminal for s in seen):
        return State.RUNNING if State.RUNNING in seen else State.PENDING
    return State.CANCELLED if seen == {State.CANCELLED} else State.FAILED


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


def retry_failed(
    view: RunView, store: Store | None = None, environ: Mapping[str, str] | None = None
) -> list[int]:
    """Resubmit the failed splits with their split ids; return those ids."""

    store = store or Store()
    failed = view.failed()
    if not failed:
        return []
    job = resolve(spec_of(view, failed[0], store, environ), view.backend, environ)
    run_splits.launch(job, failed, store=store, run_id=view.id)
    return failed


def resume_unsent(
    view: RunView, store: Store | None = None, environ: Mapping[str, str] | None = None
) -> list[int]:
    """Submit the splits a crashed `run` recorded but never handed to the backend (after
    asking the backend which it has: see `watch.reconcile`); return the ids submitted."""

    store = store or Store()
    todo = run_splits.unsent(view.id, store)
    if not todo:
        return []
    job = resolve(spec_of(view, todo[0].split_id or 0, store, environ), view.backend, environ)
    return run_splits.resume(view.id, job, store=store).submitted or []


def spec_of(
    view: RunView, split_id: int, store: Store, environ: Mapping[str, str] | None = None
) -> JobSpec:
    """The run's spec rebuilt from the store (with every split's value), secrets put back
    from the environment."""
    base = store.get(view.splits[split_id][-1].id).spec
    values = {
        i: store.get(a[-1].id).spec.get("env", {}).get(run_splits.VALUE_ENV)
        for i, a in view.splits.items()
    }
    per_attempt = (run_splits.SPLIT_ENV, run_splits.VALUE_ENV, "ANYLAUNCH_ATTEMPT")
    base["env"] = {k: v for k, v in base.get("env", {}).items() if k not in per_attempt}
    size = max(view.splits) + 1
    base["splits"] = [values.get(i) or "" for i in range(size)] if any(values.values()) else size
    return JobSpec.model_validate(unmask(base, os.environ if environ is None else environ))


def unmask(data: Any, environ: Mapping[str, str], key: str = "") -> Any:
    """Put secrets back from the environment where the store holds `***`."""
    if isinstance(data, dict):
        return {k: unmask(v, environ, k) for k, v in data.items()}
    if isinstance(data, list):
        return [unmask(v, environ, key) for v in data]
    if data == MASK:
        if key not in environ:
            raise UsageError(
                f"{key} was a secret of this run and is not set now — export {key}=... and retry"
            )
        return environ[key]
    return data
