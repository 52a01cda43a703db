"""Stores of other releases, through the CLI as a user meets them.

tests/store_fixtures/v1/jobs.db was written by the release before schema versions
(version 0), running real local jobs: one that succeeded, one that failed, one cancelled,
one detached, a run of three splits whose split 1 failed once and was retried, and a
workflow of two steps. tests/store_fixtures/make_v1.py made it, and says how to make it
again: check out that release (commit 10758d0) and run the script with its interpreter.
Beside it, expected.json holds what that release's CLI said of every job, run and
workflow (`ps --all --json`, `status ID --json`) and where each job's logs are.

Here the store is upgraded by the first command that opens it, and everything reads
back as that release said it: rows, events, plans, log paths, runs and workflows. A
store newer than the code is refused in one line, exit status 2, and left as it was,
without so much as a -wal or -shm beside it.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from reliability_helpers import FIGURES, PY, cli_env, count_tracebacks, fault, store_problems

from anylaunch.store.migrations import MIGRATIONS
from helpers import read_store, schema_version

# Every test here starts processes of its own.
pytestmark = pytest.mark.usefixtures("spawns")

FIXTURES = Path(__file__).resolve().parents[1] / "store_fixtures" / "v1"
NEWEST = MIGRATIONS[-1].version
V1_TABLES = ("jobs", "events", "ports", "runs", "workflows", "workflow_steps")


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [PY, "-m", "anylaunch", *args], env=cli_env(home), capture_output=True, text=True,
        timeout=120, cwd=home.parent,
    )  # fmt: skip
    assert count_tracebacks(done.stdout, done.stderr) == 0, done.stderr[-3000:]
    return done


def rows(path: Path, *, like: Path | None = None) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of version 1, in the order written; only the columns
    that `like`'s tables have (a later version may add some)."""
    db = read_store(path, immutable=path.is_relative_to(FIXTURES))
    model = read_store(like or path)
    try:
        out = {}
        for table in V1_TABLES:
            columns = ", ".join(r[1] for r in model.execute(f"PRAGMA table_info({table})"))
            out[table] = db.execute(f"SELECT {columns} FROM {table} ORDER BY rowid").fetchall()
        return out
    finally:
        db.close()
        model.close()


def says_the_same(expected: Any, actual: Any, where: str = "") -> None:
    """`actual` says all that `expected` says (and may say more: a field added since)."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: {actual!r}"
        for key, value in expected.items():
            assert key in actual, f"{where}.{key}: missing"
            says_the_same(value, actual[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), f"{where}: {actual!r}"
        for n, (e, a) in enumerate(zip(expected, actual, strict=True)):
            says_the_same(e, a, f"{where}[{n}]")
    else:
        assert actual == expected, f"{where}: {actual!r}, was {expected!r}"


@pytest.fixture
def old_home(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A home holding a copy of the version-0 store, and what its release said of it."""
    home = tmp_path / "home"
    home.mkdir()
    shutil.copyfile(FIXTURES / "jobs.db", home / "jobs.db")
    return home, json.loads((FIXTURES / "expected.json").read_text())


def test_a_store_of_the_release_before_versions_reads_back_whole_after_the_upgrade(
    old_home: tuple[Path, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    home, expected = old_home
    db = home / "jobs.db"
    assert schema_version(db) == 0
    named = expected["named"]
    assert len(expected["jobs"]) == 11 and set(named) >= {"cancelled", "detached", "workflow"}

    listed = cli(home, "ps", "--all", "--json")  # the first command opens and upgrades it
    assert listed.returncode == 0, listed.stderr
    assert schema_version(db) == NEWEST
    says_the_same(expected["jobs"], json.loads(listed.stdout), "ps")
    # Which code they ran was not recorded then: no source, rather than a guessed one.
    assert {job["source"] for job in json.loads(listed.stdout)} == {None}
    for some_id, status in expected["status"].items():  # each job, the run, the workflow
        shown = cli(home, "status", some_id, "--json")
        assert shown.returncode == 0, shown.stderr
        says_the_same(status, json.loads(shown.stdout), f"status {some_id}")
    states = {expected["status"][named[n]]["state"] for n in ("succeeded", "failed", "cancelled")}
    assert states == {"SUCCEEDED", "FAILED", "CANCELLED"}
    text = cli(home, "ps", "--all")
    assert text.returncode == 0 and all(j["id"] in text.stdout for j in expected["jobs"])
    workflow = cli(home, "status", named["workflow"])
    assert workflow.returncode == 0 and "train: SUCCEEDED" in workflow.stdout, workflow.stdout
    # The job folders stayed where that release put them (not here): the paths are kept,
    # and reading logs that are gone is an empty log, not an error.
    logs = cli(home, "logs", named["failed"])
    assert (logs.returncode, logs.stdout) == (0, ""), logs.stderr

    monkeypatch.setenv("ANYLAUNCH_HOME", str(home))
    from anylaunch.observe import watch

    log_paths = {
        i: [s.path for s in watch.log_sources(watch.get(i).record)] for i in expected["log_paths"]
    }
    assert log_paths == expected["log_paths"]
    assert all(p.startswith(expected["home"]) for ps in log_paths.values() for p in ps)

    # Underneath: every row of every table as that release wrote it, spec, plan and
    # metadata included; the upgrade added (an index) and removed nothing.
    assert rows(db, like=FIXTURES / "jobs.db") == rows(FIXTURES / "jobs.db")
    assert store_problems(db) == []


def test_eight_commands_opening_an_old_store_at_once_all_succeed_and_migrate_it_once(
    old_home: tuple[Path, dict[str, Any]],
) -> None:
    home, expected = old_home
    command = [PY, "-m", "anylaunch", "ps", "--all", "--json"]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    procs = [subprocess.Popen(command, env=cli_env(home), **pipes) for _ in range(8)]
    results = [(p.wait(120), *p.communicate()) for p in procs]
    FIGURES["processes at once"] = max(FIGURES["processes at once"], len(procs))
    for rc, out, err in results:
        assert count_tracebacks(out, err) == 0 and rc == 0, err
        assert [j["id"] for j in json.loads(out)] == [j["id"] for j in expected["jobs"]]
    # Migrations after the first create what they add without IF NOT EXISTS: one applied
    # twice would have failed one of the commands above.
    db = home / "jobs.db"
    assert schema_version(db) == NEWEST
    assert rows(db, like=FIXTURES / "jobs.db") == rows(FIXTURES / "jobs.db")
    assert store_problems(db) == []


def _new_store(home: Path) -> Path:
    done = cli(home, "ps")
    assert done.returncode == 0, done.stderr
    return home / "jobs.db"


def _newer_store(home: Path) -> Path:
    """A store at a version this code does not know, closed cleanly (no -wal, no -shm)."""
    db = sqlite3.connect(_new_store(home))
    db.execute(f"PRAGMA user_version = {NEWEST + 1}")
    db.close()
    return home / "jobs.db"


def _unchanged(path: Path) -> tuple[bytes, int, list[str], int]:
    """The file's bytes and mtime, and its folder's entries and mtime: a -wal or -shm
    made and removed again between two looks still moves the folder's mtime."""
    folder = path.parent
    return (
        path.read_bytes(),
        path.stat().st_mtime_ns,
        sorted(os.listdir(folder)),
        folder.stat().st_mtime_ns,
    )


@pytest.mark.parametrize("as_json", [False, True])
def test_a_newer_store_is_refused_in_one_line_and_never_written(
    tmp_path: Path, as_json: bool
) -> None:
    home = tmp_path / "home"
    db = _newer_store(home)
    job = tmp_path / "job.yaml"
    job.write_text("launcher: none\ncommand: [echo, hello]\n")
    before = _unchanged(db)
    assert before[2] == ["jobs.db"]
    fault("store")
    for command in (("ps",), ("run", str(job)), ("status", "abcd")):
        done = cli(home, *command, *(["--json"] if as_json else []))
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        if as_json:
            error = json.loads(done.stdout)
            assert error["kind"] == "error" and error["error"]["code"] == "STORE"
            message = error["error"]["message"]
        else:
            assert len(done.stderr.strip().splitlines()) == 1, done.stderr
            message = done.stderr.strip()
        assert f"{db} is at schema version {NEWEST + 1}" in message and " — " in message
        assert _unchanged(db) == before  # the same bytes and mtime, nothing made beside it


# The newer release, still running: its migration committed to the WAL, not yet folded
# into the file. A process of its own: a plain open() and close() of the file by a
# process that holds a connection drops that connection's locks.
_RUNNING_NEWER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA wal_autocheckpoint = 0")
db.execute(f"PRAGMA user_version = {sys.argv[2]}")
print("ready", flush=True)
sys.stdin.read()
"""


def test_a_newer_version_still_in_the_wal_of_a_running_release_is_refused_too(
    tmp_path: Path,
) -> None:
    """The file's header says the old version while the newer release that migrated the
    store still runs, its change in the WAL: the version read through SQLite refuses."""
    db = _new_store(tmp_path / "home")
    newer = subprocess.Popen(
        [PY, "-c", _RUNNING_NEWER, str(db), str(NEWEST + 1)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert newer.stdout is not None and newer.stdout.readline() == "ready\n"
        data = db.read_bytes()
        assert int.from_bytes(data[60:64], "big") == NEWEST  # the header lags behind
        fault("store")
        done = cli(db.parent, "ps", "--json")
        assert done.returncode == 2, done.stderr
        message = json.loads(done.stdout)["error"]["message"]
        assert f"{db} is at schema version {NEWEST + 1}" in message
        assert db.read_bytes() == data
    finally:
        newer.communicate("", timeout=60)
