"""The Python API: load, submit, Job.status/wait/logs/cancel, in-process."""

from __future__ import annotations

import sys

import anylaunch
from anylaunch.state import State


def test_submit_wait_and_read_logs(home, write, spawns):
    path = write(
        f"""
        name: api-job
        launcher: none
        nodes: 2
        command: [{sys.executable}, -c, "import os; print('hello from', os.environ['NODE_RANK'])"]
        """
    )
    spec = anylaunch.load(path)
    job = anylaunch.submit(spec)
    assert job.wait(timeout=60) is State.SUCCEEDED
    assert job.record.exit_code == 0
    assert job.logs() == "[node 0] hello from 0\n[node 1] hello from 1\n"
    assert job.logs(node=1) == "hello from 1\n"
    assert [e["state"] for e in job.events()] == ["PENDING", "STARTING", "RUNNING", "SUCCEEDED"]
    assert anylaunch.get(job.id[:5]).record.state is State.SUCCEEDED


def test_cancel_from_python(home, write, spawns):
    path = write(
        f"launcher: none\ncommand: [{sys.executable}, -c, 'import time; time.sleep(600)']\n"
    )
    job = anylaunch.submit(anylaunch.load(path))
    assert job.wait(timeout=2) in (State.STARTING, State.RUNNING)
    assert job.cancel() is State.CANCELLED
    assert job.wait(timeout=5) is State.CANCELLED


def test_command_override_and_plan_without_side_effects(home, write):
    spec = anylaunch.load(
        write("command: python train.py\n"), command=["python", "-m", "pkg.train"]
    )
    plan = anylaunch.dry_run(spec)
    argv = plan.payload["nodes"][0]["argv"]
    # `run -- ARGS` is the exec form: torchrun gets the module, its python dropped.
    assert argv[:2] == ["bash", "-c"] and "--no-python" not in argv[2]
    assert argv[2].rstrip().endswith("--max-restarts 0 -m pkg.train")
    assert anylaunch.jobs() == []
