"""The front page's data: a page of jobs and the newest runs, with their live jobs polled.

Only summary columns are read (`Store.list` never loads spec or plan blobs) and only one
page at a time, so the page costs the same with 10 jobs or 100,000. Live jobs on the page
are polled the way `ps` polls them: one backend call per backend, terminal jobs never.
"""

from __future__ import annotations

import sqlite3
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
    problems: dict[str, str] = field(default_factory=dict)  # backend -> why it was not polled


def front_page(store: Store, filters: Filters) -> FrontPage:
    page = min(max(filters.page, 0), MAX_PAGE)
    states = (filters.state,) if filters.state else ()
    # Store.list has no offset; pages past the first are rare and still summary rows only.
    records = store.list(
        limit=(page + 1) * PER_PAGE + 1, states=states, backend=filters.backend or None
    )
    shown = records[page * PER_PAGE : (page + 1) * PER_PAGE]
    problems = poll(shown, store)
    runs = newest_runs(store, filters, problems) if page == 0 else []
    return FrontPage(shown, runs, len(records) > (page + 1) * PER_PAGE, problems)


def poll(records: list[JobRecord], store: Store) -> dict[str, str]:
    """Poll live jobs one backend at a time, so a backend that cannot be reached (a Slurm
    controller down) leaves the others' jobs fresh; returns backend -> what went wrong."""
    by_backend: dict[str, list[JobRecord]] = {}
    for record in records:
        if not record.state.terminal:
            by_backend.setdefault(record.backend, []).append(record)
    problems = {}
    for backend, live in by_backend.items():
        try:
            api.refresh(live, store)
        except Exception as exc:  # shown on the page; the list itself still renders
            problems[backend] = " ".join(str(exc).split())[:300]
    return problems


def newest_runs(
    store: Store, filters: Filters, problems: dict[str, str] | None = None, limit: int = RUNS_SHOWN
) -> list[RunRow]:
    """The newest runs (groups of splits), each with its state by the rule of `RunView`."""
    # Read-only SQL of our own: Store has no list of runs, and two small queries beat
    # loading every split of every run shown.
    with closing(sqlite3.connect(store.path, timeout=60)) as db:
        ids = _run_ids(db, filters, limit)
        counts = _latest_states(db, ids)
        live = [
            i for i, (_, by_state) in counts.items() if any(not State(s).terminal for s in by_state)
        ]
        if live:
            (problems if problems is not None else {}).update(_poll_live(store, live))
            counts = _latest_states(db, ids)
    result = []
    for run_id, started in ids:
        backend, by_state = counts.get(run_id, ("", {}))
        # RunView.state reads only which states the splits' latest attempts are in, so one
        # stand-in attempt per state gives the CLI's verdict without loading every split.
        view = RunView(
            run_id,
            backend,
            {
                i: [JobRecord(id="", name="", backend=backend, state=State(s), job_dir="")]
                for i, s in enumerate(by_state)
            },
        )
        if not by_state or (filters.state and view.state is not filters.state):
            continue
        result.append(
            RunRow(run_id, backend, started, view.state, sum(by_state.values()), by_state)
        )
    return result


def _run_ids(db: sqlite3.Connection, filters: Filters, limit: int) -> list[tuple[str, float]]:
    """The newest runs from the small `runs` table (every run is recorded there first)."""
    sql, args = "SELECT id, created_at FROM runs", []
    if filters.backend:
        sql += " WHERE EXISTS (SELECT 1 FROM jobs WHERE run_id = runs.id AND backend = ?)"
        args.append(filters.backend)
    sql += " ORDER BY created_at DESC LIMIT ?"
    return [(row[0], row[1]) for row in db.execute(sql, (*args, limit))]


def _latest_states(
    db: sqlite3.Connection, ids: list[tuple[str, float]]
) -> dict[str, tuple[str, dict[str, int]]]:
    """Per run: its backend, and how many splits' newest attempt is in each state.

    Newest by rowid (rows are only appended): `created_at` sits after the spec and plan
    blobs in the row, and reading it would page through them for every split.
    """
    rows = db.execute(
        "SELECT run_id, split_id, state, backend FROM jobs"
        f" WHERE run_id IN ({','.join('?' * len(ids))}) ORDER BY rowid",
        [run_id for run_id, _ in ids],
    )
    newest: dict[tuple[str, int | None], str] = {}
    backends: dict[str, str] = {}
    for run_id, split_id, state, backend in rows:
        newest[run_id, split_id] = state  # a later attempt overwrites an earlier one
        backends.setdefault(run_id, backend)
    result: dict[str, tuple[str, dict[str, int]]] = {}
    for (run_id, _), state in newest.items():
        by_state = result.setdefault(run_id, (backends[run_id], {}))[1]
        by_state[state] = by_state.get(state, 0) + 1
    return result


def _poll_live(store: Store, run_ids: list[str]) -> dict[str, str]:
    """Let the backends move live splits along (the local backend records its own)."""
    problems: dict[str, str] = {}
    for run_id in run_ids:
        problems.update(poll(store.list(limit=None, run_id=run_id), store))
    return problems
