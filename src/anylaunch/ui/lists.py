"""The front page's data: a page of jobs and the newest runs, with their live jobs polled.

Only summary columns are read (`Store.list` never loads spec or plan blobs) and only one
page at a time, so the page costs the same with 10 jobs or 100,000. Live jobs on the page
are polled the way `ps` polls them: one backend call per backend, terminal jobs never.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from anylaunch.observe import watch
from anylaunch.observe.runs import run_state
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
            watch.refresh(live, store)
        except Exception as exc:  # shown on the page; the list itself still renders
            problems[backend] = " ".join(str(exc).split())[:300]
    return problems


def newest_runs(
    store: Store, filters: Filters, problems: dict[str, str] | None = None, limit: int = RUNS_SHOWN
) -> list[RunRow]:
    """The newest runs (groups of splits), each with its state by the rule of `run_state`.

    Two small queries (the runs, then their splits' newest states) rather than loading
    every split of every run shown."""
    ids = store.newest_runs(limit, filters.backend or None)
    counts = store.split_states([run_id for run_id, _ in ids])
    live = [
        i for i, (_, by_state) in counts.items() if any(not State(s).terminal for s in by_state)
    ]
    if live:
        (problems if problems is not None else {}).update(_poll_live(store, live))
        counts = store.split_states([run_id for run_id, _ in ids])
    result = []
    for run_id, started in ids:
        backend, by_state = counts.get(run_id, ("", {}))
        state = run_state(State(s) for s in by_state)
        if not by_state or (filters.state and state is not filters.state):
            continue
        result.append(RunRow(run_id, backend, started, state, sum(by_state.values()), by_state))
    return result


def _poll_live(store: Store, run_ids: list[str]) -> dict[str, str]:
    """Let the backends move live splits along (the local backend records its own)."""
    problems: dict[str, str] = {}
    for run_id in run_ids:
        problems.update(poll(store.list(limit=None, run_id=run_id), store))
    return problems
