"""A job's retry policy on the devstack Slurm cluster: an attempt that dies of an NCCL
watchdog timeout is diagnosed from its own log and followed by attempt 2, sent as a new
Slurm job with the same anylaunch id and run key, which succeeds."""

from __future__ import annotations

import sys
from pathlib import Path

PROGRAMS = Path(__file__).resolve().parents[1] / "programs"


def test_an_nccl_timeout_on_slurm_is_retried_and_the_job_succeeds(
    cli, write, slurm_conf, leave_no_job_behind
):
    path = write(
        f"""
        name: flaky-on-slurm
        launcher: none
        command: [{sys.executable}, {PROGRAMS / "flaky.py"}]
        env: {{FAIL_AS: nccl}}
        retry: {{max_attempts: 2, backoff: 0}}
        slurm: {{nodes: 1}}
        """
    )
    result = cli("run", str(path), "--json", timeout=300)
    job = result.json()
    status = cli("status", job["id"], "--json").json()
    assert (result.rc, job["state"], job["attempt"]) == (0, "SUCCEEDED", 2), status
    first, second = status["attempts"]
    assert first["diagnosis"]["code"] == "NCCL_TIMEOUT" and first["state"] == "FAILED"
    assert second["state"] == "SUCCEEDED" and first["native_id"] != second["native_id"]
    logs = cli("logs", job["id"]).out
    assert f"attempt=2 run_key={job['id']}" in logs, logs


def test_an_attempt_with_an_xid_79_on_its_node_is_retried_on_the_other_node(
    cli, write, slurm_conf, leave_no_job_behind
):
    path = write(
        f"""
        name: xid-on-slurm
        launcher: none
        command: [{sys.executable}, {PROGRAMS / "flaky.py"}]
        env: {{FAIL_AS: xid}}
        retry: {{max_attempts: 2, backoff: 0}}
        slurm: {{nodes: 1}}
        """
    )
    result = cli("run", str(path), "--json", timeout=300)
    job = result.json()
    status = cli("status", job["id"], "--json").json()
    assert (result.rc, job["state"], job["attempt"]) == (0, "SUCCEEDED", 2), status
    first, second = status["attempts"]
    blamed = first["diagnosis"]["node"]
    assert first["diagnosis"]["code"] == "HARDWARE_GPU" and blamed in {"n1", "n2"}, first
    assert second["avoided"] == [blamed] and "avoiding " + blamed in first["next"], second
    # The program's own word on where each attempt ran: attempt 2 on the other node.
    logs = cli("logs", job["id"]).out
    assert f"attempt=1 run_key={job['id']} node={blamed}" in logs, logs
    assert f"attempt=2 run_key={job['id']} node={({'n1', 'n2'} - {blamed}).pop()}" in logs
    said = [line.split() for line in cli("status", job["id"]).out.splitlines()]
    assert ["avoided", blamed, "(where", "earlier", "attempts", "failed)"] in said, said
