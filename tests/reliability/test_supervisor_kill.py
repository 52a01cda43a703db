"""A local job's supervisor killed with SIGKILL: its nodes die with it, the job is never
called FAILED on a guess (UNKNOWN, with the reason), its port stays reserved while any of
it runs, and `cancel` always works.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import psutil
import pytest
from reliability_helpers import FIGURES, PY, cli_env, count_tracebacks, load_json, store_problems

from anylaunch.store import Store
from helpers import job_processes, wait_until

# Every test here starts jobs and CLI processes of its own.
pytestmark = pytest.mark.usefixtures("spawns")


def _cli(home: Path, cwd: Path, *args: str):
    done = subprocess.run(
        [PY, "-m", "anylaunch", *args],
        env=cli_env(home),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
    )
    count_tracebacks(done.stdout, done.stderr)
    return done


def _start(home: Path, tmp_path: Path, yaml: str) -> dict:
    job = tmp_path / "job.yaml"
    job.write_text(yaml)
    done = _cli(home, tmp_path, "run", str(job), "--detach", "--json", "--no-preflight")
    assert done.returncode == 0, done.stderr
    return load_json(done.stdout)


def _reserved_ports(home: Path, job_id: str) -> list[int]:
    db = Store(home)._db
    return [r[0] for r in db.execute("SELECT port FROM ports WHERE job_id = ?", (job_id,))]


def _kill_supervisor(home: Path, job: dict, tmp_path: Path, ranks: int) -> None:
    """Wait until every rank runs, then SIGKILL the job's supervisor."""
    marks = tmp_path / "marks"
    wait_until(
        lambda: marks.exists() and len(list(marks.iterdir())) >= ranks,
        timeout=180,
        what="every rank started",
    )
    supervisor = psutil.Process(int(Store(home).get(job["id"]).native_id))
    os.kill(supervisor.pid, signal.SIGKILL)
    FIGURES["supervisor kills"] += 1


def _start_escaping_job_and_kill_its_supervisor(home: Path, tmp_path: Path) -> dict:
    """Each node leaves a process in a session of its own, out of the reach of any signal
    sent to the node: only the job id in its environment still names it."""
    marks = tmp_path / "marks"
    marks.mkdir()
    job = _start(
        home,
        tmp_path,
        "launcher: none\nnodes: 2\n"
        f"command: [bash, -c, 'setsid sleep 600 & touch {marks}/$NODE_RANK; wait']\n",
    )
    _kill_supervisor(home, job, tmp_path, ranks=2)
    return job


def test_a_killed_supervisors_torchrun_nodes_die_with_it_and_the_job_is_not_called_failed(
    home: Path, tmp_path: Path, torch
) -> None:
    (tmp_path / "marks").mkdir()
    (tmp_path / "train.py").write_text(
        "import os, pathlib, time\n"
        f"pathlib.Path({str(tmp_path / 'marks')!r}, os.environ['RANK']).touch()\n"
        "time.sleep(600)\n"
    )
    job = _start(
        home,
        tmp_path,
        "command: python train.py\nnodes: 2\nranks_per_node: 2\nlocal: {workdir: .}\n",
    )
    _kill_supervisor(home, job, tmp_path, ranks=4)
    # Nothing polls meanwhile: the nodes end on their own, by the parent-death signal.
    wait_until(lambda: not job_processes(job["id"]), timeout=120, what="the nodes to end")

    status = load_json(_cli(home, tmp_path, "status", job["id"], "--json").stdout)
    assert status["state"] == "UNKNOWN", status
    assert "supervisor" in status["detail"] and "died" in status["detail"]
    assert _reserved_ports(home, job["id"]) == []  # nothing of the job runs: port free
    cancelled = _cli(home, tmp_path, "cancel", job["id"], "--json")
    assert cancelled.returncode == 0, cancelled.stderr
    assert Store(home).get(job["id"]).state.value == "CANCELLED"
    assert store_problems(home / "jobs.db") == []


def test_what_escaped_a_killed_supervisor_is_ended_by_the_next_command_and_cancel_works(
    home: Path, tmp_path: Path
) -> None:
    job = _start_escaping_job_and_kill_its_supervisor(home, tmp_path)
    stray = wait_until(
        lambda: [p for p in job_processes(job["id"]) if p.name() == "sleep"] or None,
        timeout=30,
        what="the escaped sleeps",
    )
    assert len(stray) == 2
    assert _reserved_ports(home, job["id"])  # still reserved while the job's processes run

    cancelled = _cli(home, tmp_path, "cancel", job["id"], "--json")
    assert cancelled.returncode == 0, cancelled.stderr
    assert load_json(cancelled.stdout)["state"] == "CANCELLED"
    assert job_processes(job["id"]) == []
    assert _reserved_ports(home, job["id"]) == []
    assert store_problems(home / "jobs.db") == []


def test_a_poll_after_a_supervisor_kill_ends_the_escaped_processes_and_reports_unknown(
    home: Path, tmp_path: Path
) -> None:
    job = _start_escaping_job_and_kill_its_supervisor(home, tmp_path)

    def settled() -> dict | None:
        view = load_json(_cli(home, tmp_path, "status", job["id"], "--json").stdout)
        return view if view["state"] == "UNKNOWN" else None

    view = wait_until(settled, timeout=60, what="UNKNOWN", interval=0.5)
    assert "not known" in view["detail"]
    assert job_processes(job["id"]) == []
    events = [e["state"] for e in Store(home).events(job["id"])]
    assert "FAILED" not in events
    assert store_problems(home / "jobs.db") == []


def test_an_attached_run_whose_supervisor_is_killed_ends_unknown_instead_of_waiting_forever(
    home: Path, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    job = tmp_path / "job.yaml"
    job.write_text(
        f"launcher: none\nnodes: 2\ncommand: [bash, -c, 'touch {marks}/$NODE_RANK; sleep 600']\n"
    )
    attached = subprocess.Popen(
        [PY, "-m", "anylaunch", "run", str(job), "--no-preflight"],
        env=cli_env(home),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: len(Store(home).list(limit=None)) == 1, timeout=120, what="the job")
        job_id = Store(home).list(limit=None)[0].id
        wait_until(lambda: Store(home).get(job_id).native_id, timeout=60, what="its supervisor")
        _kill_supervisor(home, {"id": job_id}, tmp_path, ranks=2)
        out, err = attached.communicate(timeout=180)
    finally:
        attached.kill()
    count_tracebacks(out, err)
    assert attached.returncode == 1, err
    assert f"job {job_id} UNKNOWN" in err
    assert job_processes(job_id) == []
