"""A job's retry policy on the local backend, for real: attempts diagnosed, retried or
not as `retry:` says, by a controller that outlives the command that submitted the job,
survives being killed, and never sends an attempt twice."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import psutil

from helpers import PROGRAMS, read_store, wait_until


def flaky(write, *, fail_as: str, backoff: str = "1s", attempts: int = 3, extra: str = "") -> Path:
    return write(
        f"""
        name: flaky
        launcher: none
        command: [{sys.executable}, {PROGRAMS / "flaky.py"}]
        env: {{FAIL_AS: {fail_as}{extra}}}
        retry: {{max_attempts: {attempts}, backoff: {backoff}}}
        """
    )


def stored_job(home: Path, job_id: str) -> dict:
    """The job as the store holds it, read without any command of ours (none may run)."""
    db = read_store(home / "jobs.db", immutable=False)
    try:
        row = db.execute("SELECT state, meta FROM jobs WHERE id = ?", (job_id,)).fetchone()
        numbers = [
            r[0] for r in db.execute("SELECT number FROM attempts WHERE job_id = ?", (job_id,))
        ]
    finally:
        db.close()
    return {"state": row[0], "meta": json.loads(row[1]), "attempts": numbers}


def attempt_ended(home: Path, job_id: str, number: int) -> float:
    """When the store says attempt `number` ended (its backoff counts from there)."""
    db = read_store(home / "jobs.db", immutable=False)
    try:
        row = db.execute(
            "SELECT ended_at FROM attempts WHERE job_id = ? AND number = ?", (job_id, number)
        ).fetchone()
    finally:
        db.close()
    return float(row[0])


def test_an_nccl_watchdog_timeout_is_retried_and_the_job_succeeds_on_attempt_2(cli, write, torch):
    path = write(
        f"""
        name: nccl-retry
        command: python {PROGRAMS / "nccl_watchdog.py"}
        ranks_per_node: 2
        retry: {{max_attempts: 3, backoff: 1s}}
        """
    )
    result = cli("run", str(path), "--json", timeout=300)
    assert result.rc == 0, result.err
    job = result.json()
    assert job["state"] == "SUCCEEDED" and job["attempt"] == 2
    status = cli("status", job["id"], "--json").json()
    first, second = status["attempts"]
    assert (first["attempt"], first["state"], second["attempt"], second["state"]) == (
        1, "FAILED", 2, "SUCCEEDED",
    )  # fmt: skip
    assert first["diagnosis"]["code"] == "NCCL_TIMEOUT" and first["diagnosis"]["retryable"]
    assert first["next"].startswith("NCCL_TIMEOUT is retried") and "attempt 2 of 3" in first["next"]
    assert second["next"] is None
    logs = cli("logs", job["id"]).out
    assert "--- anylaunch: attempt 2 ---" in logs and "rank=1 trained" in logs
    # One run key for every attempt, and W&B's run id from it.
    keys = {
        line.split("run_key=")[1].split()[0] for line in logs.splitlines() if "run_key=" in line
    }
    assert keys == {job["id"]}
    assert f"wandb={job['id']}/allow" in logs
    text = cli("status", job["id"]).out
    assert "#1  FAILED" in text and "NCCL_TIMEOUT" in text and "#2  SUCCEEDED" in text


def test_a_python_exception_in_the_program_is_not_retried(cli, write):
    result = cli("run", str(flaky(write, fail_as="exception")), "--json", timeout=120)
    assert result.rc == 1
    job = result.json()
    assert job["state"] == "FAILED" and job["attempt"] == 1
    (only,) = cli("status", job["id"], "--json").json()["attempts"]
    assert only["diagnosis"]["code"] == "USER_ERROR" and only["next"] is None
    assert "USER_ERROR" in job["detail"] and "not retried" in job["detail"]


def test_the_policy_names_what_it_retries_and_stops_at_max_attempts(cli, write, tmp_path):
    path = flaky(write, fail_as="exception", attempts=2, extra=", FAIL_UNTIL: 5")
    text = path.read_text().replace("backoff: 1s", "backoff: 0, on: [USER_ERROR]")
    path.write_text(text)
    result = cli("run", str(path), "--json", timeout=120)
    assert result.rc == 1
    job = result.json()
    assert (job["state"], job["attempt"]) == ("FAILED", 2)
    first, second = cli("status", job["id"], "--json").json()["attempts"]
    assert "retry.on: USER_ERROR" in first["next"] and second["next"] is None
    assert "no attempt left (retry.max_attempts: 2)" in job["detail"]


def test_a_detached_job_is_retried_with_nothing_of_ours_left_but_its_controller(cli, write, home):
    result = cli("run", str(flaky(write, fail_as="nccl")), "--detach", "--json")
    assert result.rc == 0, result.err
    job_id = result.json()["id"]
    # No command of ours runs from here on: the store alone is read.
    done = wait_until(
        lambda: (j := stored_job(home, job_id))["state"] in ("SUCCEEDED", "FAILED") and j,
        timeout=120,
        what="the job to end",
    )
    assert done["state"] == "SUCCEEDED" and done["attempts"] == [1, 2]
    assert done["meta"]["attempt"] == 2


def test_a_killed_controller_is_replaced_by_the_next_command_and_no_attempt_is_sent_twice(
    cli, write, home, tmp_path
):
    started = tmp_path / "started"
    # A backoff long enough that the controller is surely killed inside it, even when each
    # `status` below takes seconds on a busy machine (with 4 s, the controller once sent
    # attempt 2 before the kill: the test's race, not the product's).
    path = flaky(write, fail_as="nccl", backoff="15s", extra=f", ATTEMPTS_FILE: {started}")
    job_id = cli("run", str(path), "--detach", "--json").json()["id"]
    # Attempt 1 failed and the controller decided on attempt 2, to be sent after 15 s.
    wait_until(lambda: "attempt 2 of 3" in json.dumps(cli("status", job_id, "--json").json()),
               timeout=60, what="attempt 1's decision")  # fmt: skip
    keeper = stored_job(home, job_id)["meta"]["keeper"]
    os.kill(keeper["pid"], signal.SIGKILL)
    killed_at = time.time()
    wait_until(lambda: not psutil.pid_exists(keeper["pid"]) or psutil.Process(keeper["pid"]).status() == psutil.STATUS_ZOMBIE,
               what="the controller to die")  # fmt: skip
    due = attempt_ended(home, job_id, 1) + 15
    assert killed_at < due, "the controller was killed only after its backoff: nothing to test"
    time.sleep(max(0.0, due - time.time()) + 3)  # past the backoff: nothing sent it
    assert started.read_text().split() == ["1"]
    cli("status", job_id)  # the next command that touches the job starts a new one
    done = wait_until(
        lambda: (
            (j := stored_job(home, job_id))["state"] != "RUNNING" and j["state"] != "PENDING" and j
        ),
        timeout=120,
        what="the job to end",
    )
    assert done["state"] == "SUCCEEDED" and done["attempts"] == [1, 2]
    assert done["meta"]["keeper"]["pid"] != keeper["pid"]
    assert started.read_text().split() == ["1", "2"]


def test_a_cancel_between_attempts_ends_the_job_and_makes_no_next_one(cli, write, home, tmp_path):
    started = tmp_path / "started"
    path = flaky(write, fail_as="nccl", backoff="30s", extra=f", ATTEMPTS_FILE: {started}")
    job_id = cli("run", str(path), "--detach", "--json").json()["id"]
    wait_until(lambda: "attempt 2 of 3" in json.dumps(cli("status", job_id, "--json").json()),
               timeout=60, what="attempt 1's decision")  # fmt: skip
    result = cli("cancel", job_id, "--json")
    assert result.rc == 0 and result.json()["state"] == "CANCELLED"
    keeper = stored_job(home, job_id)["meta"]["keeper"]
    wait_until(
        lambda: not psutil.pid_exists(keeper["pid"]), timeout=30, what="its controller to leave"
    )
    assert started.read_text().split() == ["1"]
    assert stored_job(home, job_id)["attempts"] == [1]
