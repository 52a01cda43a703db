"""Store trouble: an immutable (or read-only) jobs.db, a damaged one, and ANYLAUNCH_HOME
pointing at a file. Each command ends with one line naming the file and the fix, exit
status 2 (`{"error": ...}` under --json), and the jobs already stored stay as they were.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from reliability_helpers import PY, cli_env, count_tracebacks, fault

import inproc

COMMANDS = [("run", "JOB"), ("run", "JOB", "--json"), ("ps",), ("ps", "--json")]


def cli(home: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command in this process: those here are refused before any job starts."""
    done = inproc.completed(args, cli_env(home), cwd)
    assert count_tracebacks(done.stdout, done.stderr) == 0, done.stderr[-3000:]
    return done


def assert_one_line_refusal(done: subprocess.CompletedProcess[str], names: str, as_json: bool):
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    if as_json:
        message = json.loads(done.stdout)["error"]["message"]
    else:
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        message = lines[0]
    assert names in message and " — " in message, message  # the file, then the fix


@pytest.fixture
def stored(home: Path, tmp_path: Path, spawns) -> tuple[Path, str]:
    """A store holding one finished job; returns the job file and that job's id."""
    job = tmp_path / "job.yaml"
    job.write_text("launcher: none\ncommand: [echo, hello]\n")
    done = subprocess.run(
        [PY, "-m", "anylaunch", "run", str(job), "--json"], env=cli_env(home),
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return job, json.loads(done.stdout)["id"]


@contextmanager
def immutable(path: Path) -> Iterator[None]:
    """chattr +i where we may (root on a filesystem that has it), else mode 0444 for a
    user (root ignores modes)."""
    if os.geteuid() == 0:
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)]).returncode:
            pytest.skip("no chattr +i on this filesystem, and root ignores file modes")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True)
    else:
        path.chmod(0o444)
        try:
            yield
        finally:
            path.chmod(0o644)


def _run_all(home: Path, job: Path, names: str, cwd: Path) -> None:
    for command in COMMANDS:
        args = [str(job) if a == "JOB" else a for a in command]
        assert_one_line_refusal(cli(home, *args, cwd=cwd), names, "--json" in args)


def test_an_immutable_store_refuses_a_run_in_one_line_and_keeps_its_jobs(
    home: Path, tmp_path: Path, stored: tuple[Path, str]
) -> None:
    job, job_id = stored
    db = home / "jobs.db"
    with immutable(db):
        fault("store")
        for as_json in (False, True):
            args = ["run", str(job), *(["--json"] if as_json else [])]
            assert_one_line_refusal(cli(home, *args, cwd=tmp_path), str(db), as_json)
        listed = cli(home, "ps", "--json", cwd=tmp_path)  # reading still works
        assert listed.returncode == 0 and [j["id"] for j in json.loads(listed.stdout)] == [job_id]
    after = json.loads(cli(home, "ps", "--json", cwd=tmp_path).stdout)
    assert [(j["id"], j["state"]) for j in after] == [(job_id, "SUCCEEDED")]


@pytest.mark.parametrize("damage", ["not a database", "damaged pages"])
def test_a_damaged_store_is_refused_in_one_line_and_left_untouched(
    damage: str, home: Path, tmp_path: Path, stored: tuple[Path, str]
) -> None:
    job, _ = stored
    db = home / "jobs.db"
    cli(home, "ps", cwd=tmp_path)  # a clean close: the WAL folded back into the file
    for extra in ("jobs.db-wal", "jobs.db-shm"):
        (home / extra).unlink(missing_ok=True)
    data = bytearray(db.read_bytes())
    if damage == "not a database":
        data[:16] = b"not sqlite here!"
    else:  # the header stays valid; the pages behind it are garbage
        data[100:] = bytes((i * 7 + 3) % 256 for i in range(len(data) - 100))
    db.write_bytes(bytes(data))
    fault("store")
    _run_all(home, job, str(db), tmp_path)
    assert db.read_bytes() == bytes(data)  # nothing rewritten: the owner may recover it


def test_anylaunch_home_pointing_at_a_file_is_refused_in_one_line(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("launcher: none\ncommand: [echo, hello]\n")
    home = tmp_path / "not-a-folder"
    home.write_text("precious\n")
    fault("store")
    _run_all(home, job, str(home), tmp_path)
    _run_all(home / "below", job, str(home / "below"), tmp_path)
    assert home.read_text() == "precious\n"
