"""The job store: forward-only states, id lookup, port reservations, many processes at once."""

from __future__ import annotations

import multiprocessing
import sqlite3
from dataclasses import replace

import pytest

from anylaunch.errors import JobNotFound, UsageError
from anylaunch.state import State
from anylaunch.store import JobRecord, Store, WorkflowRecord


def record(job_id: str, backend: str = "local") -> JobRecord:
    return JobRecord(
        id=job_id, name=job_id, backend=backend, state=State.PENDING, job_dir=f"/tmp/{job_id}"
    )


def test_states_only_move_forward(home):
    store = Store()
    store.add(record("aaaa0001"))
    assert store.transition("aaaa0001", State.RUNNING)
    assert not store.transition("aaaa0001", State.PENDING)  # stale poll
    assert not store.transition("aaaa0001", State.UNKNOWN)  # a backend that could not tell
    assert store.transition("aaaa0001", State.SUCCEEDED, exit_code=0)
    assert not store.transition("aaaa0001", State.FAILED, exit_code=1)  # terminal is final
    job = store.get("aaaa0001")
    assert (job.state, job.exit_code) == (State.SUCCEEDED, 0)
    assert [e["state"] for e in store.events("aaaa0001")] == ["PENDING", "RUNNING", "SUCCEEDED"]


def test_lookup_by_unique_prefix(home):
    store = Store()
    store.add(record("abcd1111"))
    store.add(record("abcd2222"))
    assert store.get("abcd1").id == "abcd1111"
    with pytest.raises(UsageError, match="ambiguous"):
        store.get("abcd")
    with pytest.raises(JobNotFound):
        store.get("zzzz")


def test_prefix_wildcards_are_plain_characters(home):
    store = Store()
    store.add(record("abcd1111"))
    for pattern in ("abc_", "ab%", "ABCD1"):  # LIKE would read these as patterns, or any case
        with pytest.raises(JobNotFound):
            store.get(pattern)


def _steps(store: Store, lookup) -> int:
    """SQLite virtual-machine steps a lookup takes (in thousands): a count, not a time."""
    steps = 0

    def tick() -> int:
        nonlocal steps
        steps += 1
        return 0

    store._db.set_progress_handler(tick, 1000)
    try:
        lookup()
    finally:
        store._db.set_progress_handler(None, 1000)
    return steps


def test_lookups_by_prefix_read_the_index_not_every_row(home):
    store = Store()
    jobs = [replace(record(f"{i:08d}"), run_id=f"r{i:07d}") for i in range(20_000)]
    store.add_many([*jobs, record("qq123456")])
    # A scan of 20,000 rows takes hundreds of thousands of steps; an index search a few.
    assert _steps(store, lambda: store.get("qq12")) < 20
    assert _steps(store, lambda: store.get("00012345")) < 20
    assert _steps(store, lambda: store.resolve_run("r0012345")) < 20
    assert store.get("qq12").id == "qq123456"
    assert store.resolve_run("r0012345") == "r0012345"


def test_workflows_are_found_by_key_and_listed_newest_first_through_an_index(home):
    store = Store()
    doc = {"steps": {"s": {"spec": {"command": ["x"] * 1000}}}}  # a plan is no small row
    for i in range(3_000):
        store.add_workflow(WorkflowRecord(f"wf-{i:05d}", "n", "f", doc, "SUCCEEDED"))
    store.add_workflow(WorkflowRecord("wf-open", "n", "f", doc, "RUNNING"), key="same")
    again = WorkflowRecord("wf-again", "n", "f", doc, "PENDING")
    # A scan of 3,000 workflows takes tens of thousands of steps; an index search a few.
    assert _steps(store, lambda: store.workflows(limit=5)) < 3
    assert _steps(store, lambda: store.add_workflow(again, key="same")) < 3
    assert [w.id for w in store.workflows(limit=2)] == ["wf-open", "wf-02999"]
    assert store.add_workflow(again, key="same") == "wf-open"  # the unfinished one wins


def test_port_reservations_are_exclusive_until_the_job_ends(home):
    store = Store()
    store.add(record("job00001"))
    assert store.reserve_port(25000, "job00001")
    assert not store.reserve_port(25000, "job00002")
    store.transition("job00001", State.FAILED)
    assert store.reserve_port(25000, "job00002")


def test_store_uses_wal(home):
    Store()
    db = sqlite3.connect(home / "jobs.db")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _hammer(worker: int) -> None:
    store = Store()
    for i in range(40):
        job_id = f"w{worker}j{i:04d}"
        store.add(record(job_id))
        store.transition(job_id, State.RUNNING)
        store.list(limit=20)
        store.transition(job_id, State.SUCCEEDED, exit_code=0)


def test_eight_processes_at_once_lose_nothing(home, spawns):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_hammer, args=(w,)) for w in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * 8  # no "database is locked" escaped
    store = Store()
    assert store.count() == 320
    assert {j.state for j in store.list(limit=None)} == {State.SUCCEEDED}
    db = sqlite3.connect(home / "jobs.db")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
