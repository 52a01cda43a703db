"""A workflow whose steps all run on the devstack Slurm cluster, through the real CLI:
one submission with native dependencies and no controller, a killed `anylaunch run`
that changes nothing, and `retry --failed` of one array task and the step after it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import pytest

from anylaunch.backends.slurm import commands
from anylaunch.store import Store
from anylaunch.workflow import api as wfapi
from helpers import wait_until

# Every test here submits to the shared cluster: its jobs are cancelled at the end.
pytestmark = pytest.mark.usefixtures("leave_no_job_behind")


def states(summary):
    return {s["id"]: s["state"] for s in summary["steps"]}


def test_slurm_chain_is_one_submission_and_completes_after_run_is_killed(
    cli_inproc, write, tmp_path, home
):
    go, log = tmp_path / "go", tmp_path / "order.log"
    path = write(
        f"""
        name: chain
        launcher: none
        slurm: {{}}
        steps:
          a:
            command: [bash, -c, "while [ ! -f {go} ]; do sleep 0.2; done; echo a >> {log}"]
          b:
            needs: [a]
            command: [bash, -c, "echo b >> {log}"]
          c:
            needs: [b]
            command: [bash, -c, "echo c >> {log}"]
        """,
        "wf.yaml",
    )
    run = subprocess.Popen(
        [sys.executable, "-m", "anylaunch", "run", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "ANYLAUNCH_HOME": str(home)},
    )
    assert run.stderr is not None
    said = run.stderr.readline()  # printed once the workflow is handed over
    workflow_id = re.search(r"workflow (wf-\w+)", said).group(1)  # type: ignore[union-attr]
    run.send_signal(signal.SIGKILL)  # the submitting `anylaunch` goes away
    run.wait()

    store = Store(home)
    record = store.get_workflow(workflow_id)
    assert record.doc["mode"] == "slurm" and record.controller is None
    jobs = {s: store.list(run_id=f"{workflow_id}.{s}") for s in "abc"}
    assert all(len(j) == 1 and j[0].native_id for j in jobs.values())
    native = {s: j[0].native_id for s, j in jobs.items()}
    for step, need in (("b", "a"), ("c", "b")):
        shown = commands.run(["scontrol", "show", "job", native[step]]).stdout
        assert f"Dependency=afterok:{native[need]}(unfulfilled)" in shown

    pending = cli_inproc("status", workflow_id, "--json").json()
    assert pending["controller"] is False and pending["mode"] == "slurm"
    commands.CALLS.clear()
    assert wfapi.get(workflow_id, store).state() == "RUNNING"
    assert (commands.CALLS["squeue"], commands.CALLS["sacct"]) == (1, 0)  # one poll, all steps
    go.touch()
    done = wait_until(
        lambda: (
            (s := cli_inproc("status", workflow_id, "--json").json())["state"] == "SUCCEEDED" and s
        ),
        timeout=180,
        what="the chain to finish",
        interval=1,
    )
    assert states(done) == dict.fromkeys("abc", "SUCCEEDED")
    assert done["controller"] is False
    assert log.read_text().split() == ["a", "b", "c"]
    assert all(len(store.list(run_id=f"{workflow_id}.{s}")) == 1 for s in "abc")


@pytest.mark.slow  # the same, faster, at the chain's level: test_workflow_chain.py
def test_retry_failed_on_slurm_reruns_one_array_task_and_the_step_after_it(
    cli_inproc, write, tmp_path
):
    log = tmp_path / "order.log"
    path = write(
        f"""
        name: evals
        launcher: none
        slurm: {{}}
        steps:
          prep:
            command: [bash, -c, "echo prep >> {log}"]
          eval:
            needs: [prep]
            splits: 4
            command:
              - bash
              - -c
              - 'echo eval$SPLIT_ID >> {log}; [ "$SPLIT_ID$ANYLAUNCH_ATTEMPT" != 21 ]'
          export:
            needs: [eval]
            command: [bash, -c, "echo export >> {log}"]
        """,
        "wf.yaml",
    )
    first = cli_inproc("run", str(path), "--json", timeout=300)
    assert first.rc == 1, first.err
    wf = first.json()
    assert (wf["state"], wf["mode"]) == ("FAILED", "slurm")
    assert states(wf) == {"prep": "SUCCEEDED", "eval": "FAILED", "export": "CANCELLED"}
    export = wf["steps"][2]
    assert export["error"] == "never ran: eval failed, and Slurm cancelled the steps after it"
    lines = log.read_text().split()
    assert lines[0] == "prep" and sorted(lines[1:]) == ["eval0", "eval1", "eval2", "eval3"]

    again = cli_inproc("retry", wf["id"], "--failed", "--json", timeout=300)
    assert again.rc == 0, again.err
    done = again.json()
    assert done["state"] == "SUCCEEDED"
    attempts = {s["id"]: [len(split["attempts"]) for split in s["splits"]] for s in done["steps"]}
    assert attempts == {"prep": [1], "eval": [1, 1, 2, 1], "export": [2]}
    assert log.read_text().split()[5:] == ["eval2", "export"]  # only split 2, then export
    anew = cli_inproc("run", str(path), "--detach", "--json")
    assert anew.rc == 0 and anew.json()["id"] != wf["id"]  # it ended: a new workflow
    cli_inproc("cancel", anew.json()["id"])


def test_cancel_stops_a_slurm_chain_and_nothing_after_runs(cli_inproc, write, tmp_path):
    log = tmp_path / "order.log"
    path = write(
        f"""
        launcher: none
        slurm: {{}}
        steps:
          slow:
            command: [bash, -c, "echo slow >> {log}; sleep 300"]
          after:
            needs: [slow]
            command: [bash, -c, "echo after >> {log}"]
          last:
            needs: [after]
            command: [bash, -c, "echo last >> {log}"]
        """,
        "wf.yaml",
    )
    started = cli_inproc("run", str(path), "--detach", "--json").json()
    wait_until(
        lambda: (
            cli_inproc("status", started["id"], "--json").json()["steps"][0]["state"] == "RUNNING"
        ),
        timeout=120,
        what="the first step to run",
    )
    cancelled = cli_inproc("cancel", started["id"], "--json")
    assert cancelled.rc == 0, cancelled.err
    body = cancelled.json()
    assert body["state"] == "CANCELLED"
    assert states(body) == dict.fromkeys(["slow", "after", "last"], "CANCELLED")
    assert log.read_text().split() == ["slow"]


# `anylaunch run` that dies at one step's sbatch, just after Slurm took the job.
KILLED_AT_SBATCH = """
import os, signal, sys
from anylaunch.backends.slurm import commands
real = commands.run
def run(argv, **kw):
    proc = real(argv, **kw)
    if argv[0] == "sbatch" and "--job-name=chain-b" in open(argv[-1]).read():
        os.kill(os.getpid(), signal.SIGKILL)
    return proc
commands.run = run
sys.argv = ["anylaunch", "run", sys.argv[1], "--detach"]
from anylaunch.cli import main
main()
"""


@pytest.mark.slow  # the same, faster, at the chain's level: test_workflow_chain.py
def test_status_finishes_a_submission_killed_midway_with_no_step_sent_twice(
    cli_inproc, write, tmp_path, home
):
    log = tmp_path / "order.log"
    path = write(
        f"""
        name: chain
        launcher: none
        slurm: {{}}
        env: {{STEP_TOKEN: "${{STEP_TOKEN}}"}}
        steps:
          a:
            name: chain-a
            command: [bash, -c, "echo a >> {log}"]
          b:
            name: chain-b
            needs: [a]
            command: [bash, -c, "echo b >> {log}"]
          c:
            name: chain-c
            needs: [b]
            command: [bash, -c, "echo c >> {log}"]
        """,
        "wf.yaml",
    )
    token = {"STEP_TOKEN": "tok-for-the-steps-1234"}
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_AT_SBATCH, str(path)],
        env={**os.environ, "ANYLAUNCH_HOME": str(home), **token},
        capture_output=True,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL
    (record,) = Store(home).workflows()
    assert Store(home).list(run_id=f"{record.id}.c") == []  # c was never started

    # From a shell without the steps' secret, status shows the graph and submits nothing.
    blind = cli_inproc("status", record.id, "--json")
    assert blind.rc == 0, blind.err
    assert Store(home).list(run_id=f"{record.id}.c") == []

    done = wait_until(
        lambda: (
            (s := cli_inproc("status", record.id, "--json", env=token).json())["state"]
            == "SUCCEEDED"
            and s
        ),
        timeout=180,
        what="the workflow to finish",
        interval=1,
    )
    assert [len(s["splits"][0]["attempts"]) for s in done["steps"]] == [1, 1, 1]
    assert log.read_text().split() == ["a", "b", "c"]
    (b_job,) = Store(home).list(run_id=f"{record.id}.b")
    queue = commands.run(["squeue", "--noheader", "--states=all", "--format=%k"]).stdout.split()
    assert queue.count(f"anylaunch:{b_job.id}") == 1  # the job Slurm took before the kill


# `anylaunch run` during which the workflow is cancelled, just after the first sbatch.
CANCELLED_DURING_RUN = """
import sys
from anylaunch.backends.slurm import commands
from anylaunch.store import Store
from anylaunch.workflow import engine
real = commands.run
def run(argv, **kw):
    proc = real(argv, **kw)
    if argv[0] == "sbatch" and "--job-name=first" in open(argv[-1]).read():
        engine.cancel(Store().workflows()[0].id, Store())
    return proc
commands.run = run
sys.argv = ["anylaunch", "run", sys.argv[1], "--detach"]
from anylaunch.cli import main
main()
"""


def test_cancel_while_run_hands_steps_over_leaves_nothing_running(
    cli_inproc, write, tmp_path, home
):
    log = tmp_path / "order.log"
    path = write(
        f"""
        launcher: none
        slurm: {{}}
        steps:
          first:
            name: first
            command: [bash, -c, "echo first >> {log}; sleep 300"]
          other:
            name: other
            command: [bash, -c, "echo other >> {log}; sleep 300"]
        """,
        "wf.yaml",
    )
    started = subprocess.run(
        [sys.executable, "-c", CANCELLED_DURING_RUN, str(path)],
        env={**os.environ, "ANYLAUNCH_HOME": str(home)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert started.returncode == 0, started.stderr
    (record,) = Store(home).workflows()
    body = cli_inproc("status", record.id, "--json").json()
    assert body["state"] == "CANCELLED"
    assert states(body) == {"first": "CANCELLED", "other": "CANCELLED"}
    assert body["steps"][1]["splits"] == []  # the second root was never handed over
