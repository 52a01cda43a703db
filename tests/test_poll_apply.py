"""Polls report, the API writes: one refresh is one transaction of the store.

The jobs here are local jobs whose supervisors finished and left `result.json`, as a real
supervisor does; the local backend's own poll reads them. A fault half-way through the
write is a real SQLite error (a trigger that aborts the statement), not a stand-in.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from anylaunch.errors import StoreError
from anylaunch.observe import watch
from anylaunch.state import State
from anylaunch.store import JobRecord, Store, Update

ENDS = {"done0001": ("SUCCEEDED", 0), "done0002": ("FAILED", 3), "done0003": ("SUCCEEDED", 0)}


def finished_local_jobs(store: Store) -> list[JobRecord]:
    """Three RUNNING local jobs whose supervisors are gone and wrote their results."""
    records = []
    for job_id, (state, code) in ENDS.items():
        job_dir = store.jobs_dir(job_id)
        job_dir.mkdir(parents=True)
        (job_dir / "result.json").write_text(json.dumps({"state": state, "exit_code": code}))
        records.append(
            JobRecord(
                id=job_id, name=job_id, backend="local", state=State.PENDING,
                job_dir=str(job_dir), native_id=str(2**22 + 7),  # no such process
            )
        )  # fmt: skip
    store.add_many(records)
    store.transition_many([(r.id, State.RUNNING, None, None) for r in records])
    return store.list(limit=None)


def transactions(store: Store) -> list[str]:
    """Every write transaction the store's connection begins from now on."""
    begun: list[str] = []
    store._db.set_trace_callback(lambda sql: begun.append(sql) if sql.startswith("BEGIN") else None)
    return begun


def test_one_refresh_writes_every_polled_job_in_one_transaction(home: Path) -> None:
    store = Store()
    jobs = finished_local_jobs(store)
    begun = transactions(store)
    watch.refresh(jobs, store)
    assert begun == ["BEGIN IMMEDIATE"]
    assert {j.id: (j.state.value, j.exit_code) for j in jobs} == ENDS  # records updated too
    stored = {j.id: (j.state.value, j.exit_code) for j in store.list(limit=None)}
    assert stored == ENDS


def test_a_fault_half_way_through_a_refresh_leaves_nothing_of_it_written(home: Path) -> None:
    store = Store()
    jobs = sorted(finished_local_jobs(store), key=lambda j: j.id)
    events_before = {j.id: store.events(j.id) for j in jobs}
    # The second job's write fails after the first job's was made (the disk, a bug):
    with sqlite3.connect(store.path) as db:
        db.execute(
            "CREATE TRIGGER fault BEFORE UPDATE ON jobs WHEN NEW.id = 'done0002'"
            " BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END"
        )
    with pytest.raises(StoreError, match="disk I/O error"):
        watch.refresh(jobs, store)
    after = store.list(limit=None)
    assert {j.state for j in after} == {State.RUNNING}  # not done0001 either
    assert {j.id: store.events(j.id) for j in after} == events_before
    # Nothing was lost either: the next poll, with the fault gone, writes it all.
    with sqlite3.connect(store.path) as db:
        db.execute("DROP TRIGGER fault")
    watch.refresh(store.list(limit=None), store)
    assert {j.id: (j.state.value, j.exit_code) for j in store.list(limit=None)} == ENDS


def test_a_process_killed_half_way_through_applying_a_poll_leaves_the_store_as_before(
    home: Path, spawns
) -> None:
    """A refresh killed inside its transaction (SIGKILL, power loss) is rolled back by
    SQLite's journal: the next reader sees the store as it was before the poll."""
    store = Store()
    jobs = finished_local_jobs(store)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child applies the poll and is killed before it can commit
        try:
            child = Store()
            moves = []

            def die_on_the_second_move(sql: str) -> None:
                if sql.startswith("UPDATE jobs SET state"):
                    moves.append(sql)
                    if len(moves) == 2:
                        os.kill(os.getpid(), 9)

            child._db.set_trace_callback(die_on_the_second_move)
            os.write(write, b"x")
            child.apply([Update(j.id, State.SUCCEEDED, 0, None) for j in jobs])
        finally:
            os._exit(1)
    os.read(read, 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == 9
    assert {j.state for j in Store().list(limit=None)} == {State.RUNNING}


def test_a_change_a_poll_repeats_is_written_once(home: Path) -> None:
    """A native id or metadata change (a relaunch seen twice, by two processes or a
    cached answer) writes one event; a change made stale by another process, none."""
    store = Store()
    store.add(
        JobRecord(
            id="sky00001", name="s", backend="skypilot", state=State.PENDING,
            job_dir=str(home / "jobs" / "sky00001"), native_id="managed/4",
        )
    )  # fmt: skip
    seen = Update(
        "sky00001", State.RUNNING, native_id="managed/4", expected_native_id="managed/4",
        meta={"recoveries": 1}, events=("recovery 1",), attempt=True,
    )  # fmt: skip
    store.apply([seen])
    store.apply([seen])
    assert [e["detail"] for e in store.events("sky00001")] == ["recorded", "recovery 1", None]
    moved_on = Update("sky00001", None, native_id="managed/9", expected_native_id="managed/5")
    store.apply([moved_on])
    assert store.get("sky00001").native_id == "managed/4"


def test_a_resubmission_is_not_recorded_for_a_job_the_user_asked_to_cancel(home: Path) -> None:
    store = Store()
    store.add(
        JobRecord(
            id="lep00001", name="l", backend="lepton", state=State.RUNNING,
            job_dir=str(home / "jobs" / "lep00001"), native_id="l-1",
        )
    )  # fmt: skip
    store.request_cancel("lep00001")
    claim = Update(
        "lep00001", State.UNKNOWN, native_id="pending:l-2", expected_native_id="l-1",
        meta={"attempt": 2}, events=("attempt 2",), attempt=True,
    )  # fmt: skip
    after = store.apply([claim])["lep00001"]
    assert after.native_id == "l-1" and after.meta == {}
    # And the backend's FAILED for a job whose kill was asked for reads CANCELLED.
    assert store.apply([Update("lep00001", State.FAILED, 1)])["lep00001"].state is State.CANCELLED


@pytest.mark.parametrize("backend", ["lepton", "skypilot", "slurm"])
def test_a_remote_backend_has_no_store_to_write_while_it_polls(backend: str) -> None:
    """Polls report, the API writes: these backends hold no Store at run time (the
    names appear in their type hints only), so a poll cannot open one."""
    import importlib

    module = importlib.import_module(f"anylaunch.backends.{backend}.backend")
    assert "Store" not in vars(module)
    assert not [name for name in vars(module) if "store" in name.lower()]


DEAD = {"pid": 2**22 + 7, "started": 1.0}  # a submitter that died mid-submit


def orphaned_local_jobs(store: Store) -> list[JobRecord]:
    """Three PENDING local jobs recorded without a native id by a submitter that died:
    one whose supervisor ran and left its result (the backend has it), a lone job and a
    split that were never started."""
    records = []
    for job_id, run_id in (("orph0001", None), ("orph0002", None), ("orph0003", "r-orphans")):
        job_dir = store.jobs_dir(job_id)
        job_dir.mkdir(parents=True)
        records.append(
            JobRecord(
                id=job_id, name=job_id, backend="local", state=State.PENDING,
                job_dir=str(job_dir), run_id=run_id, split_id=0 if run_id else None,
                meta={"submitter": DEAD},
            )
        )  # fmt: skip
    result = Path(records[0].job_dir) / "result.json"
    result.write_text(json.dumps({"state": "SUCCEEDED", "exit_code": 0}))
    store.add_many(records)
    return store.list(limit=None)


def test_what_reconcile_learns_is_written_in_one_transaction(home: Path) -> None:
    store = Store()
    jobs = orphaned_local_jobs(store)
    # The split's note fails after the other two jobs' outcomes were written:
    with sqlite3.connect(store.path) as db:
        db.execute(
            "CREATE TRIGGER fault BEFORE UPDATE ON jobs"
            " WHEN NEW.id = 'orph0003' AND NEW.detail IS NOT OLD.detail"
            " BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END"
        )
    with pytest.raises(StoreError, match="disk I/O error"):
        watch.refresh(jobs, store)
    after = {j.id: j for j in store.list(limit=None)}
    assert {j.state for j in after.values()} == {State.PENDING}
    assert {j.native_id for j in after.values()} == {None}  # the found job was not adopted
    with sqlite3.connect(store.path) as db:
        db.execute("DROP TRIGGER fault")
    watch.refresh(store.list(limit=None), store)
    found, lone, split = (store.get(i) for i in ("orph0001", "orph0002", "orph0003"))
    assert (found.state, found.native_id) == (State.SUCCEEDED, "")
    assert lone.state is State.FAILED and lone.detail == f"{watch.NOT_SUBMITTED} — run it again"
    assert "submitter" not in lone.meta  # settled: no submitter left to wait for
    assert split.state is State.PENDING and split.detail is not None
    assert (
        split.detail.startswith(watch.NOT_SUBMITTED) and "retry r-orphans --failed" in split.detail
    )
