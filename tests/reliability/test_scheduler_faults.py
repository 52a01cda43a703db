"""Scheduler faults on the devstack Slurm cluster: a node set DOWN under a running job,
and slurmctld restarted while anylaunch polls.

- With `requeue` (the default) Slurm requeues a NODE_FAIL'd job; anylaunch must keep it
  live (never FAILED) and see it succeed on its second run. Slurm holds a requeued job
  for 120 s (BeginTime); the test lets it start at once with `scontrol update
  starttime=now`, an admin's move, so the test stays short.
- With `requeue: false` the job ends FAILED, its detail and diagnosis say NODE_FAIL.
- slurmctld stopped and started again mid-poll: every poll meanwhile succeeds (sacct
  answers from slurmdbd), the job is never marked failed, and it ends SUCCEEDED.

Each test puts the cluster back (node resumed, slurmctld running and answering) in a
`finally`, so a failure here cannot break the rest of the suite.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from reliability_helpers import PY, cli_env, count_tracebacks, fault, wait_until


@pytest.fixture
def cluster(devstack: dict[str, str]) -> Iterator[dict[str, str]]:
    """The devstack cluster's environment; afterwards, the cluster as it was."""
    env = {**os.environ, "SLURM_CONF": devstack["SLURM_CONF"]}
    try:
        yield env
    finally:
        _restore(env)


def _slurm(env: dict[str, str], *argv: str, check: bool = False) -> str:
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    if check and proc.returncode != 0:
        raise AssertionError(f"{argv}: {proc.stderr}")
    return proc.stdout


def _ctld_pidfile(env: dict[str, str]) -> Path:
    return Path(env["SLURM_CONF"]).parent.parent / "run" / "slurmctld.pid"


def _ctld_up(env: dict[str, str]) -> bool:
    proc = subprocess.run(["scontrol", "ping"], env=env, capture_output=True, text=True, timeout=30)
    return proc.returncode == 0 and "UP" in proc.stdout


def _restore(env: dict[str, str]) -> None:
    """slurmctld running (started the way scripts/devstack.d/slurm starts it) and every
    node back in service."""
    if not _ctld_up(env):
        subprocess.run(["slurmctld"], env=env, timeout=60, check=False)
        wait_until(lambda: _ctld_up(env), timeout=60, what="slurmctld to answer")

    def out_of_service() -> list[str]:
        rows = _slurm(env, "sinfo", "-h", "-N", "-o", "%N %t").split()
        return [
            n
            for n, t in zip(rows[::2], rows[1::2], strict=True)
            if t.startswith(("down", "drain", "drng"))
        ]

    for node in out_of_service():
        _slurm(env, "scontrol", "update", f"nodename={node}", "state=resume")
    wait_until(lambda: not out_of_service(), timeout=60, what="every node back in service")


def _node_of(env: dict[str, str], native: str) -> str:
    return wait_until(
        lambda: _slurm(env, "squeue", "-h", "-j", native, "-o", "%N").strip(),
        timeout=60,
        what="the job's node",
    )


def _job_file(tmp_path: Path, *, requeue: bool, seconds: int) -> tuple[Path, Path]:
    """A one-node job that logs each start (with Slurm's restart count)."""
    runs = tmp_path / "starts.txt"
    path = tmp_path / "job.yaml"
    path.write_text(
        "name: nodefail\n"
        "launcher: none\n"
        f"command: [bash, -c, 'echo start-$${{SLURM_RESTART_COUNT:-0}} >> {runs}; sleep {seconds}']\n"
        "slurm:\n"
        f"  requeue: {str(requeue).lower()}\n"
    )
    return path, runs


def _cli(env: dict[str, str], home: Path, *args: str) -> dict:
    done = subprocess.run(
        [PY, "-m", "anylaunch", *args, "--json"],
        env=cli_env(home, SLURM_CONF=env["SLURM_CONF"]),
        capture_output=True,
        text=True,
        timeout=120,
    )
    count_tracebacks(done.stdout, done.stderr)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def _states_seen(status: dict) -> list[str]:
    return [e["state"] for e in status.get("events", [])]


def test_node_down_under_a_requeueable_job_requeues_it_and_it_succeeds(
    cluster: dict[str, str], home: Path, tmp_path: Path
) -> None:
    path, starts = _job_file(tmp_path, requeue=True, seconds=4)
    job = _cli(cluster, home, "run", str(path), "--detach", "--no-preflight")
    native = job["native_id"]
    wait_until(lambda: starts.exists(), timeout=60, what="the job to start")
    node = _node_of(cluster, native)
    _slurm(cluster, "scontrol", "update", f"nodename={node}", "state=down", "reason=anylaunch-test",
           check=True)  # fmt: skip
    fault("slurm")
    wait_until(
        lambda: "BeginTime" in _slurm(cluster, "squeue", "-h", "-j", native, "-o", "%r"),
        timeout=60,
        what="Slurm to requeue the job",
    )
    assert _cli(cluster, home, "status", job["id"])["state"] != "FAILED"
    # The devstack's slurmd answers at once (ReturnToService=2 puts the node back): drain
    # it, or the job would restart there while its old step is still being torn down.
    _slurm(cluster, "scontrol", "update", f"nodename={node}", "state=drain", "reason=anylaunch-test",
           check=True)  # fmt: skip
    _slurm(cluster, "scontrol", "update", f"jobid={native}", "starttime=now", check=True)
    status = wait_until(
        lambda: (
            (s := _cli(cluster, home, "status", job["id"]))["state"] in ("SUCCEEDED", "FAILED")
            and s
        ),
        timeout=90,
        what="the requeued job to end",
        interval=0.5,
    )
    assert status["state"] == "SUCCEEDED", status
    assert "FAILED" not in _states_seen(status)
    assert starts.read_text().split() == ["start-0", "start-1"]  # ran again after NODE_FAIL


def test_node_down_under_a_job_without_requeue_ends_it_failed_as_node_fail(
    cluster: dict[str, str], home: Path, tmp_path: Path
) -> None:
    path, starts = _job_file(tmp_path, requeue=False, seconds=30)
    job = _cli(cluster, home, "run", str(path), "--detach", "--no-preflight")
    wait_until(lambda: starts.exists(), timeout=60, what="the job to start")
    node = _node_of(cluster, job["native_id"])
    _slurm(cluster, "scontrol", "update", f"nodename={node}", "state=down", "reason=anylaunch-test",
           check=True)  # fmt: skip
    fault("slurm")
    status = wait_until(
        lambda: (s := _cli(cluster, home, "status", job["id"]))["state"] != "RUNNING" and s,
        timeout=60,
        what="the job to end",
        interval=0.5,
    )
    assert status["state"] == "FAILED", status
    assert "NODE_FAIL" in (status["detail"] or ""), status
    assert _cli(cluster, home, "diagnose", job["id"])["code"] == "NODE_FAIL"


def test_slurmctld_restarted_mid_poll_marks_nothing_failed(
    cluster: dict[str, str], home: Path, tmp_path: Path
) -> None:
    path, starts = _job_file(tmp_path, requeue=True, seconds=15)
    job = _cli(cluster, home, "run", str(path), "--detach", "--no-preflight")
    wait_until(lambda: starts.exists(), timeout=60, what="the job to start")
    pid = int(_ctld_pidfile(cluster).read_text())
    os.kill(pid, signal.SIGTERM)  # slurmctld saves its state and exits
    fault("slurm")
    wait_until(lambda: not _ctld_up(cluster), timeout=30, what="slurmctld to stop")
    seen: list[str] = []
    # A poll that starts while slurmctld is away and spans its restart: squeue keeps
    # retrying its connection, sacct (through slurmdbd) answers if squeue gives up.
    poll = threading.Thread(
        target=lambda: seen.append(_cli(cluster, home, "status", job["id"])["state"])
    )
    poll.start()
    try:
        time.sleep(3)
    finally:
        subprocess.run(["slurmctld"], env=cluster, timeout=60, check=False)
        wait_until(lambda: _ctld_up(cluster), timeout=60, what="slurmctld to answer again")
        poll.join(120)
    assert "FAILED" not in seen and seen, seen
    last: list[dict] = []
    try:
        status = wait_until(
            lambda: (
                (
                    last.append(s := _cli(cluster, home, "status", job["id"]))
                    or s["state"] in ("SUCCEEDED", "FAILED", "CANCELLED")
                )
                and s
            ),
            timeout=90,
            what="the job to end",
            interval=0.5,
        )
    except AssertionError as exc:  # what the job looked like, and what Slurm says of it
        squeue = subprocess.run(["squeue", "-a"], env=cluster, capture_output=True, text=True)
        raise AssertionError(f"{exc}: last status {last[-1:]}; squeue: {squeue.stdout}") from exc
    assert status["state"] == "SUCCEEDED", status
    assert "FAILED" not in _states_seen(status)
    assert starts.read_text().split() == ["start-0"]  # not restarted by the outage
