"""The store's schema versions: migrations applied in order, each in one transaction, once
however many processes open an old store together, and a crash part-way leaving the
version before. Against real SQLite files; the old store is tests/store_fixtures/v1
(see tests/reliability/test_store_upgrade.py for what it holds and how it was made).
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from anylaunch.errors import StoreError
from anylaunch.store import Store
from anylaunch.store.migrations import MIGRATIONS, Migration, header_version, open_migrated
from helpers import read_store, schema_version

FIXTURE = Path(__file__).resolve().parent / "store_fixtures" / "v1" / "jobs.db"
NEWEST = MIGRATIONS[-1].version


def schema_of(path: Path) -> list[tuple[str, str, str, str | None]]:
    db = read_store(path)
    try:
        return db.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
        ).fetchall()
    finally:
        db.close()


def old_store(tmp_path: Path) -> Path:
    """A copy of the store the release before schema versions wrote (version 0)."""
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "jobs.db"
    shutil.copyfile(FIXTURE, path)
    return path


def test_migrations_are_numbered_one_by_one_from_1():
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))


def test_version_1_is_the_schema_the_release_before_versions_made(tmp_path):
    assert schema_version(FIXTURE) == 0
    path = tmp_path / "jobs.db"
    open_migrated(path, MIGRATIONS[:1]).close()
    assert schema_version(path) == 1
    assert schema_of(path) == schema_of(FIXTURE)


def test_a_new_store_is_made_by_every_migration_from_0(tmp_path):
    Store(tmp_path).close()
    path = tmp_path / "jobs.db"
    assert schema_version(path) == NEWEST
    upgraded = old_store(tmp_path / "old")
    open_migrated(upgraded).close()
    assert schema_of(path) == schema_of(upgraded)  # one schema, however a store got it


# A version 2 for the machinery alone: a table that counts how often it was applied, and
# a slow statement that keeps the write lock while other processes queue for it.
COUNTED = (
    *MIGRATIONS[:1],
    Migration(
        2,
        "CREATE TABLE applied (n INTEGER);"
        " INSERT INTO applied VALUES (1);"
        " CREATE TABLE filler AS WITH RECURSIVE c(x) AS"
        " (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 300000) SELECT x FROM c",
    ),
    Migration(3, "UPDATE applied SET n = n + 100"),
)


def _open_together(path: str, ready, failures) -> None:
    try:
        ready.wait(60)
        db = open_migrated(Path(path), COUNTED)
        assert db.execute("PRAGMA user_version").fetchone()[0] == 3
        db.close()
    except BaseException as exc:
        failures.put(repr(exc))
        raise


def test_processes_that_open_an_old_store_at_once_apply_each_migration_once(tmp_path, spawns):
    path = old_store(tmp_path)
    ctx = multiprocessing.get_context("spawn")
    ready, failures = ctx.Barrier(8), ctx.Queue()
    procs = [
        ctx.Process(target=_open_together, args=(str(path), ready, failures)) for _ in range(8)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * 8, failures.get(timeout=5)
    db = read_store(path)
    # Once each: one row (migration 2), counted up by 100 once (migration 3).
    assert db.execute("SELECT n FROM applied").fetchall() == [(101,)]
    assert db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 11
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()


_CRASH = """
import os, signal, sys
from pathlib import Path
from anylaunch.store.connection import connect
from anylaunch.store.migrations import MIGRATIONS, upgrade

path, at = Path(sys.argv[1]), sys.argv[2]

def crash(statement):
    if statement.startswith(at):
        os.kill(os.getpid(), signal.SIGKILL)  # mid-migration: no rollback, no close

db = connect(path)
db.set_trace_callback(crash)
upgrade(db, path, MIGRATIONS)
"""


@pytest.mark.parametrize(
    ("start", "crash_at", "left_at"),
    [
        ("new", "CREATE TABLE IF NOT EXISTS runs", 0),  # half of version 1's tables made
        ("old", MIGRATIONS[-1].statements()[-1], NEWEST - 1),  # the newest one's last step
    ],
)
def test_a_crash_mid_migration_leaves_the_version_before_whole(
    tmp_path, start, crash_at, left_at, spawns
):
    path = old_store(tmp_path) if start == "old" else tmp_path / "jobs.db"
    if left_at > 0:
        open_migrated(path, MIGRATIONS[:left_at]).close()
    before = schema_of(path) if path.exists() else []
    done = subprocess.run([sys.executable, "-c", _CRASH, str(path), crash_at], timeout=60)
    assert done.returncode == -9  # killed where it was asked to be
    db = sqlite3.connect(path)  # recovers the WAL as any later opener would
    assert db.execute("PRAGMA user_version").fetchone()[0] == left_at
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()
    assert schema_of(path) == before  # nothing of the migration that was cut short
    Store(tmp_path).close()  # the next open applies it whole
    assert schema_version(path) == NEWEST


def test_a_store_newer_than_the_code_is_refused_by_its_version(tmp_path):
    path = tmp_path / "jobs.db"
    Store(tmp_path).close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {NEWEST + 1}")
    db.close()
    with pytest.raises(StoreError, match=rf"{path} is at schema version {NEWEST + 1}"):
        Store(tmp_path)
    assert header_version(path) == NEWEST + 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs.db"]


def test_a_second_store_in_one_process_leaves_the_first_ones_locks(tmp_path, spawns):
    """Reading the version of a store this process holds open must not drop its locks:
    another process closing the store would then take itself for the last one and
    delete the WAL under this one."""
    first = Store(tmp_path)
    first.count()
    wal = tmp_path / "jobs.db-wal"
    assert wal.exists()
    Store(tmp_path).close()  # reads the version again, in this process
    other = "from anylaunch.store import Store; import sys; Store().count()"
    env = {**os.environ, "ANYLAUNCH_HOME": str(tmp_path)}
    subprocess.run([sys.executable, "-c", other], env=env, check=True, timeout=60)
    assert wal.exists()  # the other process saw this one's connection
    first.close()
