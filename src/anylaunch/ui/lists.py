"""The front page's data: a page of jobs and the newest runs, with their live jobs polled.

Only summary columns are read (`Store.list` never loads spec or plan blobs) and only one
page at a time, so the page costs the same with 10 jobs or 100,000. Live jobs on the page
are polled the way `ps` polls them: one backend call per backend, terminal jobs never.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from contextlib import closing
from dataclasses import dataclass, field

from anylaunch import api
from anylaunch.runs import RunView
from anylaunch.state import State
from anylaunch.store import JobRecord, Store

PER_PAGE = 50
RUNS_SHOWN = 20
MAX_PAGE = 200  # past this, `anylaunch ps --all` is the better tool


@dataclass
class Filters:
    backend: str | None = None
    state: State | None = None
    page: int = 0

    def query(self, **change: object) -> str:
        """This filter as a query string, with `change` applied (for links)."""
        values = {"backend": self.backend, "state": self.state, "page": self.page, **change}
        pairs = [f"{k}={v.value if isinstance(v, State) else v}" for k, v in values.items() if v]
        return "?" + "&".join(pairs) if pairs else "?"


@dataclass
class RunRow:
    id: str
    backend: str
    created_at: float
    state: State
    splits: int
    counts: dict[str, int] = field(default_factory=dict)  # latest attempt's state -> splits


@dataclass
class FrontPage:
    jobs: list[JobRecord]
    runs: list[RunRow]
    has_more: bool


def front_page(store: Store, filters: Filters) -> FrontPage:
    page = min(max(filters.page, 0), MAX_PAGE)
    states = (filters.state,) if filters.state else ()
    # Store.list has no offset; pages past the first are rare and still summary rows only.
    records = store.list(
        limit=(page + 1) * PER_PAGE + 1, states=states, backend=filters.backend or None
    )
    shown = records[page * PER_PAGE : (page + 1) * PER_PAGE]
    runs = newest_runs(store, filters) if page == 0 else []
    return FrontPage(api.refresh(shown, store), runs, len(records) > (page + 1) * PER_PAGE)


def newest_runs(store: Store, filters: Filters, limit: int = RUNS_SHOWN) -> list[RunRow]:
    """The newest runs (groups of splits), each with its state by the rule of `RunView`."""
    # Read-only SQL of our own: Store has no list of runs, and one query beats one per run.
    with closing(sqlite3.connect(store.path, timeout=60)) as db:
        where, args = "run_id IS NOT NULL", []
        if filters.backend:
            where += " AND backend = ?"
            args.append(filters.backend)
        ids = [
            row[0]
            for row in db.execute(
                f"SELECT run_id, MIN(created_at) AS at FROM jobs WHERE {where}"
                " GROUP BY run_id ORDER BY at DESC LIMIT ?",
                (*args, limit),
            )
        ]
        grouped, started, backend = _splits(db, ids)
        live = [i for i, splits in grouped.items() if _live(splits)]
        if live:
            _poll_live(store, live)
            grouped, started, backend = _splits(db, ids)
    result = []
    for run_id in ids:
        view = RunView(run_id, backend[run_id], grouped[run_id])
        if filters.state and view.state is not filters.state:
            continue
        counts = Counter(a[-1].state.value for a in view.splits.values())
        result.append(
            RunRow(
                run_id, view.backend, started[run_id], view.state, len(view.splits), dict(counts)
            )
        )
    return result


def _splits(
    db: sqlite3.Connection, ids: list[str]
) -> tuple[dict[str, dict[int, list[JobRecord]]], dict[str, float], dict[str, str]]:
    """Each run's attempts per split (oldest first), its start and its backend."""
    rows = db.execute(
        "SELECT run_id, split_id, state, backend, created_at FROM jobs"
        f" WHERE run_id IN ({','.join('?' * len(ids))}) ORDER BY created_at",
        ids,
    ).fetchall()
    grouped: dict[str, dict[int, list[JobRecord]]] = {i: {} for i in ids}
    started: dict[str, float] = {}
    backend: dict[str, str] = {}
    for run_id, split_id, state, name, created in rows:
        # Only what RunView.state reads: one rule for a run's state, the CLI's.
        attempt = JobRecord(id="", name="", backend=name, state=State(state), job_dir="")
        grouped[run_id].setdefault(split_id or 0, []).append(attempt)
        started.setdefault(run_id, created)
        backend.setdefault(run_id, name)
    return grouped, started, backend


def _live(splits: dict[int, list[JobRecord]]) -> bool:
    return any(not attempts[-1].state.terminal for attempts in splits.values())


def _poll_live(store: Store, run_ids: list[str]) -> None:
    """Let the backends move live splits along (the local backend records its own)."""
    for run_id in run_ids:
        live = [r for r in store.list(limit=None, run_id=run_id) if not r.state.terminal]
        api.refresh(live, store)
