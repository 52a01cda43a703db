"""A submit whose outcome is unknown stays UNKNOWN, and a later poll finds the job and
adopts it: never a FAILED "submit failed" for a job that ran, never a second job.

One test per backend, each losing the submit's answer the way that backend can lose
it: the Lepton emulator drops the POST's answer and then fails every list call for a
while; a Slurm `sbatch` whose output is lost on the way back; a local submitter killed
(SIGKILL) between starting the supervisor and noting its pid.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import textwrap
from pathlib import Path

import pytest
from reliability_helpers import (
    FIGURES,
    PY,
    cli_env,
    count_tracebacks,
    fault,
    load_json,
    store_problems,
)

from anylaunch import api
from anylaunch.state import State
from anylaunch.store import Store
from helpers import wait_until
from lepton_emulator.server import Server, set_faults

# Every test here starts jobs and CLI processes of its own.
pytestmark = pytest.mark.usefixtures("spawns")


def _cli(env: dict[str, str], cwd: Path, *args: str, timeout: float = 300):
    done = subprocess.run(
        [PY, "-m", "anylaunch", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    count_tracebacks(done.stdout, done.stderr)
    return done


def _states(home: Path, job_id: str) -> list[str]:
    return [e["state"] for e in Store(home).events(job_id)]


def test_a_lepton_create_whose_answer_is_lost_is_adopted_by_name_not_failed(
    home: Path, tmp_path: Path, lepton_server: Server
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(
        "name: lost-answer\n"
        "image: python:3.11\n"
        "launcher: none\n"
        "command: [bash, -c, 'echo ran-once']\n"
        "lepton: {resource_shape: cpu.small}\n"
    )
    faults = [
        {"kind": "drop", "route": "POST /jobs", "count": 1},
        {"kind": "http", "route": "GET /jobs", "status": 503, "count": 8},
    ]
    with lepton_server.open(state_dir=tmp_path / "emulator") as emu:
        set_faults(emu.url, emu.token, faults)
        env = cli_env(home, **emu.env())
        done = _cli(env, tmp_path, "run", str(job), "--json", "--no-preflight")
        faults = emu.world.faults
        fired = sum(faults._fired.values())
        for index, times in faults._fired.items():
            fault(f"lepton {faults.list()[index].kind}", times)
        emu.clear_faults()
        created = emu.world.list("alive_and_archive")
    FIGURES["jobs submitted"] += len(created)
    FIGURES["duplicates"] += max(0, len(created) - 1)
    summary = load_json(done.stdout)
    assert done.returncode == 0, done.stderr
    assert summary["state"] == "SUCCEEDED", summary
    assert len(created) == 1
    assert summary["native_id"] == created[0].id
    assert "UNKNOWN" in _states(home, summary["id"])  # the lost answer was never a failure
    assert fired == 9
    assert store_problems(home / "jobs.db") == []


@pytest.fixture
def sbatch_that_loses_its_answer(tmp_path: Path, devstack: dict[str, str]) -> dict[str, str]:
    """PATH with an `sbatch` that submits for real, then loses what it printed."""
    real = shutil.which("sbatch")
    if real is None:
        pytest.skip("sbatch is not installed")
    bin_dir = tmp_path / "lossy-bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "sbatch"
    wrapper.write_text(f'#!/bin/sh\n"{real}" "$@" > /dev/null\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", **devstack}


def test_an_sbatch_whose_answer_is_lost_is_adopted_by_its_comment_not_failed(
    home: Path, tmp_path: Path, sbatch_that_loses_its_answer: dict[str, str]
) -> None:
    out = tmp_path / "ran"
    job = tmp_path / "job.yaml"
    job.write_text(f"launcher: none\ncommand: [bash, -c, 'echo x >> {out}']\nslurm: {{}}\n")
    env = cli_env(home, **sbatch_that_loses_its_answer)
    done = _cli(env, tmp_path, "run", str(job), "--json", "--no-preflight")
    fault("slurm sbatch answer lost")
    summary = load_json(done.stdout)
    assert done.returncode == 0, done.stderr
    assert summary["state"] == "SUCCEEDED", summary
    assert summary["native_id"] and summary["native_id"].isdigit()
    assert out.read_text() == "x\n"  # one job, run once
    assert "UNKNOWN" in _states(home, summary["id"])
    FIGURES["jobs submitted"] += 1
    assert store_problems(home / "jobs.db") == []


def test_a_slurm_array_whose_answer_is_lost_is_adopted_split_by_split(
    home: Path, tmp_path: Path, sbatch_that_loses_its_answer: dict[str, str]
) -> None:
    out = tmp_path / "ran"
    out.mkdir()
    job = tmp_path / "job.yaml"
    job.write_text(
        f"launcher: none\nsplits: 3\ncommand: [bash, -c, 'echo x >> {out}/$SPLIT_ID']\nslurm: {{}}\n"
    )
    env = cli_env(home, **sbatch_that_loses_its_answer)
    done = _cli(env, tmp_path, "run", str(job), "--json", "--no-preflight")
    fault("slurm sbatch answer lost")
    view = load_json(done.stdout)
    assert done.returncode == 0, done.stderr
    assert view["state"] == "SUCCEEDED", view
    natives = sorted(s["attempts"][-1]["native_id"] for s in view["splits"])
    base = natives[0].split("_")[0]
    assert natives == [f"{base}_{i}" for i in range(3)]
    assert sorted(p.name for p in out.iterdir()) == ["0", "1", "2"]
    assert all(p.read_text() == "x\n" for p in out.iterdir())
    FIGURES["jobs submitted"] += 3


_KILLED_SUBMITTER = textwrap.dedent(
    """
    import os, signal, sys
    from anylaunch import api
    from anylaunch.store import Store

    def die(self, *args, **kwargs):  # the supervisor runs; its pid is never noted
        print(args[0], flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    Store.set_native = die
    api.submit(api.load(sys.argv[1]), "local", check=False)
    """
)


def test_a_local_job_whose_submitter_was_killed_is_adopted_by_its_supervisor(
    home: Path, tmp_path: Path
) -> None:
    out = tmp_path / "ran"
    job = tmp_path / "job.yaml"
    job.write_text(f"launcher: none\ncommand: [bash, -c, 'sleep 1; echo x >> {out}']\n")
    env = cli_env(home)
    killed = subprocess.run(
        [PY, "-c", _KILLED_SUBMITTER, str(job)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    fault("local submitter killed")
    job_id = killed.stdout.strip()
    assert Store(home).get(job_id).native_id is None
    done = _cli(env, tmp_path, "status", job_id, "--json")  # the next command adopts it
    assert done.returncode == 0, done.stderr
    # The supervisor records the job's progress itself: the next command finds it by
    # its process (or its result) and never fails it as unsubmitted.
    assert api.get(job_id, store=Store(home)).wait(timeout=120) is State.SUCCEEDED
    wait_until(lambda: out.exists(), timeout=10, what="the job's output")
    assert out.read_text() == "x\n"
    assert store_problems(home / "jobs.db") == []
