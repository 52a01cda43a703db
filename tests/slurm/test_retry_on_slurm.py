"""A job's retry policy on the devstack Slurm cluster, carried out by the job itself from
inside its allocation: an attempt that dies of an NCCL watchdog timeout, or of an Xid 79
on its node, is read by the job's own triage and the job requeues itself (kept off that
node), with nothing of ours running on the submitting side; a Python exception in the
program ends the job. Slurm holds a requeued job about two minutes before it starts
again, hence `slow`."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from tests.slurm.test_time_limit_continuation import ours_running

from anylaunch.observe import retries
from anylaunch.store import Store

PROGRAMS = Path(__file__).resolve().parents[1] / "programs"


def _squeue(native: str) -> str:
    return subprocess.run(
        ["squeue", "-h", "-j", native, "-o", "%T"], capture_output=True, text=True
    ).stdout.strip()


def _slurm_jobs_named(name: str) -> set[str]:
    """Every Slurm job of the last hour that the cluster's accounting holds by `name`."""
    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-a", "-S", "now-1hours", f"--name={name}", "-o", "JobID"],
        capture_output=True,
        text=True,
    ).stdout
    return set(out.split())


def _runs(native: str) -> list[str]:
    """How each run of Slurm job `native` ended, earlier runs included (`--duplicates`)."""
    out = subprocess.run(
        ["sacct", "-j", native, "-D", "-X", "-n", "-P", "-o", "State"],
        capture_output=True,
        text=True,
    ).stdout
    return out.split()


def _unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def _job_file(write, name: str, fail_as: str) -> Path:
    return write(
        f"""
        name: {name}
        launcher: none
        command: [{sys.executable}, {PROGRAMS / "flaky.py"}]
        env: {{FAIL_AS: {fail_as}}}
        retry: {{max_attempts: 2, backoff: 0}}
        slurm: {{nodes: 1}}
        """
    )


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_an_nccl_timeout_requeues_the_job_from_inside_and_it_succeeds(
    cli, write, home, slurm_conf, leave_no_job_behind
):
    name = _unique("nccl-on-slurm")
    job = cli("run", str(_job_file(write, name, "nccl")), "--detach", "--json").json()
    native = job["native_id"]
    strays = []
    # Until Slurm says the job ended, only squeue is asked (no command of ours runs).
    deadline = time.monotonic() + 480
    while time.monotonic() < deadline:
        strays += ours_running(home)
        if _squeue(native) in ("", "COMPLETED", "FAILED", "CANCELLED"):
            break
        time.sleep(3)
    assert not strays, strays
    assert "REQUEUED" in _runs(native), _runs(native)  # the same Slurm job ran again
    status = cli("status", job["id"], "--json").json()
    logs = cli("logs", job["id"]).out
    assert (status["state"], status["attempt"]) == ("SUCCEEDED", 2), (status, logs)
    first, second = status["attempts"]
    assert first["diagnosis"]["code"] == "NCCL_TIMEOUT" and first["state"] == "FAILED", first
    assert "attempt 2 of 2" in first["next"] and "from inside its allocation" in first["next"]
    assert second["state"] == "SUCCEEDED"
    assert first["native_id"] == second["native_id"] == native  # one Slurm job, requeued
    assert f"attempt=2 run_key={job['id']}" in logs, logs
    assert _slurm_jobs_named(name) == {native}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_an_xid_79_on_its_node_requeues_the_job_onto_the_other_node(
    cli, write, home, slurm_conf, leave_no_job_behind
):
    name = _unique("xid-on-slurm")
    job = cli("run", str(_job_file(write, name, "xid")), "--detach", "--json").json()
    native = job["native_id"]
    # Once the job has requeued itself, a controller on this host (the backstop for
    # failures the job leaves as they ended) is started: it must not send attempt 2 again.
    deadline = time.monotonic() + 480
    started = None
    while time.monotonic() < deadline:
        state = _squeue(native)
        if started is None and state == "PENDING" and "REQUEUED" in _runs(native):
            cli("status", job["id"], "--json")  # reads the attempts the job recorded
            record = Store(home).get(job["id"])
            assert retries.number(record) == 2, Store(home).attempts(record)
            started = retries.ensure(record, Store(home))
        if state in ("", "COMPLETED", "FAILED", "CANCELLED"):
            break
        time.sleep(3)
    assert started is not None, "the job never requeued itself"
    status = cli("status", job["id"], "--json").json()
    logs = cli("logs", job["id"]).out
    assert (status["state"], status["attempt"]) == ("SUCCEEDED", 2), (status, logs)
    first, second = status["attempts"]
    blamed = first["diagnosis"]["node"]
    assert first["diagnosis"]["code"] == "HARDWARE_GPU" and blamed in {"n1", "n2"}, first
    assert second["avoided"] == [blamed] and "avoiding " + blamed in first["next"], second
    # The program's own word on where each attempt ran: attempt 2 on the other node.
    assert f"attempt=1 run_key={job['id']} node={blamed}" in logs, logs
    assert f"attempt=2 run_key={job['id']} node={({'n1', 'n2'} - {blamed}).pop()}" in logs
    said = [line.split() for line in cli("status", job["id"]).out.splitlines()]
    assert ["avoided", blamed, "(where", "earlier", "attempts", "failed)"] in said, said
    # One Slurm job in all: the controller found attempt 2 begun and sent nothing.
    assert _slurm_jobs_named(name) == {native}
    assert {a["native_id"] for a in status["attempts"]} == {native}


def test_a_python_exception_on_slurm_is_not_retried(cli, write, slurm_conf, leave_no_job_behind):
    path = _job_file(write, "exception-on-slurm", "exception")
    result = cli("run", str(path), "--json", timeout=300)
    job = result.json()
    status = cli("status", job["id"], "--json").json()
    assert (job["state"], job["attempt"]) == ("FAILED", 1), status
    (only,) = status["attempts"]
    assert only["diagnosis"]["code"] == "USER_ERROR" and only["next"] is None, only
    logs = cli("logs", job["id"]).out
    assert "USER_ERROR is not retried" in logs, logs  # the job's own triage said so
    assert f"attempt=2 run_key={job['id']}" not in logs


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_job_that_continued_itself_and_failed_again_is_not_sent_again(
    cli, write, home, slurm_conf, leave_no_job_behind
):
    """Both attempts fail inside the job, and nothing of ours looks until it ended: the
    first poll records the job's own attempts before its controller decides, so the
    controller sees attempt 2 of 2 ended and sends none."""
    name = _unique("twice-on-slurm")
    path = write(
        f"""
        name: {name}
        launcher: none
        command: [{sys.executable}, {PROGRAMS / "flaky.py"}]
        env: {{FAIL_AS: nccl, FAIL_UNTIL: "2"}}
        retry: {{max_attempts: 2, backoff: 0}}
        slurm: {{nodes: 1}}
        """
    )
    job = cli("run", str(path), "--detach", "--json").json()
    native = job["native_id"]
    deadline = time.monotonic() + 480
    while time.monotonic() < deadline and _squeue(native) not in ("", "FAILED"):
        time.sleep(3)
    # The first look after the end: it starts the controller, which decides.
    status = cli("status", job["id"], "--json").json()
    settle = time.monotonic() + 60
    while status["state"] not in ("FAILED", "SUCCEEDED") and time.monotonic() < settle:
        time.sleep(2)
        status = cli("status", job["id"], "--json").json()
    assert (status["state"], status["attempt"]) == ("FAILED", 2), status
    first, second = status["attempts"]
    assert first["diagnosis"]["code"] == "NCCL_TIMEOUT" and "attempt 2 of 2" in first["next"]
    assert second["state"] == "FAILED" and second["next"] is None, second
    assert _slurm_jobs_named(name) == {native}
