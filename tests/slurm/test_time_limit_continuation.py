"""A job longer than its Slurm time limit continues itself from inside its allocation:
with `retry:`, the batch shell requeues its own job just before the limit, after the
early signal let the program checkpoint, and the next run resumes from it. It is
submitted with --detach and nothing of ours runs on the submitting side meanwhile."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

PROGRAMS = Path(__file__).resolve().parent / "programs"


def ours_running(home: Path) -> list[str]:
    """anylaunch processes on this machine (a controller, a CLI) working for this test's
    store: other tests and users run their own on the same machine."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        line = " ".join(proc.info["cmdline"] or [])
        if "anylaunch.launch.controller" not in line and "-m anylaunch " not in line:
            continue
        try:
            if proc.environ().get("ANYLAUNCH_HOME") == str(home):
                found.append(line)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_job_longer_than_its_limit_requeues_itself_and_succeeds(
    cli, write, tmp_path, home, slurm_conf, leave_no_job_behind
):
    ckpt = tmp_path / "progress"
    path = write(
        f"""
        name: longer-than-its-limit
        launcher: none
        command: [{sys.executable}, {PROGRAMS / "needs_100s.py"}]
        env: {{CKPT: {ckpt}, WORK_S: "100"}}
        retry: {{max_attempts: 4}}
        slurm: {{nodes: 1, time: "00:01:00", signal_lead: 15}}
        """
    )
    job = cli("run", str(path), "--detach", "--json").json()
    native = job["native_id"]
    seen, strays = [], []
    # Until Slurm says the job ended, only squeue is asked (no command of ours runs).
    deadline = time.monotonic() + 780
    while time.monotonic() < deadline:
        strays += ours_running(home)
        state = subprocess.run(
            ["squeue", "-h", "-j", native, "-o", "%T"], capture_output=True, text=True
        ).stdout.strip()
        if not seen or seen[-1] != state:
            seen.append(state)
        if state in ("", "COMPLETED", "FAILED", "TIMEOUT", "CANCELLED"):
            break
        time.sleep(3)
    assert not strays, strays
    assert "PENDING" in seen[1:], seen  # requeued: back in the queue, then ran again
    status = cli("status", job["id"], "--json").json()
    logs = cli("logs", job["id"]).out
    assert status["state"] == "SUCCEEDED", (seen, status, logs)
    attempts = status["attempts"]
    assert len(attempts) >= 2 and status["attempt"] == len(attempts), attempts
    # Each run the time limit ended says so, and why the next followed. (A run Slurm
    # itself requeued, after a node failure on the shared cluster, has no such record.)
    limited = [a for a in attempts[:-1] if a["state"] == "TIMEOUT"]
    assert limited, attempts
    for one in limited:
        assert one["diagnosis"]["code"] == "TIME_LIMIT"
        assert f"attempt {one['attempt'] + 1} of 4" in one["next"]
    assert attempts[-1]["state"] == "SUCCEEDED"
    assert {a["native_id"] for a in attempts} == {native}  # one Slurm job, requeued
    assert "checkpoint at step" in logs and re.search(r"attempt=\d resumes at step [1-9]", logs)
    assert "done: 100 steps" in logs, logs
