"""A running local job reached from outside: exec, stack, forward on a real 2x2 torchrun
job (CPU, gloo), and the hang watchdog stopping one stuck in a loop."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from helpers import free_port_pair, wait_until

PROGRAMS = Path(__file__).resolve().parent / "programs"
STUCK = "stuck_in_the_loop"
SECRET = "hf_live_test_secret_value_42"


@pytest.fixture
def stuck_job(cli, cli_inproc, write, torch):
    """A running 2 nodes x 2 ranks job whose ranks are stuck, node N serving `node N`."""
    port = free_port_pair()
    path = write(
        f"""
        name: stuck
        command: python {PROGRAMS / "stuck.py"}
        nodes: 2
        ranks_per_node: 2
        env:
          OMP_NUM_THREADS: 1
          SERVE_PORT: {port}
          MY_SETTING: from-the-job-file
          HF_TOKEN: ${{HF_TOKEN}}
        """
    )
    job = cli("run", str(path), "--detach", "--json", env={"HF_TOKEN": SECRET}).json()
    wait_until(lambda: cli_inproc("logs", job["id"]).out.count("ready rank=") == 4, 180, "4 ranks")
    yield job["id"], port
    cli("cancel", job["id"])


def test_exec_runs_in_the_nodes_environment_with_its_status_and_masked_output(cli, stuck_job):
    job_id, _ = stuck_job
    result = cli("exec", job_id, "--node", "1", "--", "printenv", "NODE_RANK")
    assert (result.rc, result.out) == (0, "1\n"), result.err
    # The job's env: (exported by the node's shell) and its secret, which never prints.
    shown = cli("exec", job_id, "--", "sh", "-c", 'echo "$MY_SETTING $HF_TOKEN"; exit 3')
    assert shown.rc == 3 and shown.out == "from-the-job-file ***\n"
    assert SECRET not in shown.out + shown.err
    captured = cli("exec", job_id, "--node", "1", "--json", "--", "sh", "-c", "echo $HF_TOKEN; pwd")
    body = captured.json()
    assert body["exit_code"] == 0 and body["stdout"].splitlines()[0] == "***"
    assert body["stdout"].splitlines()[1] == os.getcwd()  # the node's working folder
    missing = cli("exec", job_id, "--", "no-such-program-here")
    assert missing.rc == 127 and "no-such-program-here" in missing.err
    assert "Traceback" not in missing.err


def test_stack_shows_the_stuck_function_of_every_rank(cli, stuck_job):
    job_id, _ = stuck_job
    result = cli("stack", job_id, "--json")
    assert result.rc == 0, result.err
    ranks = result.json()["ranks"]
    assert [(r["rank"], r["node"]) for r in ranks] == [(0, 0), (1, 0), (2, 1), (3, 1)]
    for rank in ranks:
        assert rank["error"] is None and STUCK in rank["stack"], rank
    text = cli("stack", job_id, "--node", "1")
    assert text.out.count(STUCK) == 2 and "== rank 2 (node 1" in text.out


def test_forward_serves_a_nodes_http_server_here_until_interrupted(cli, home, stuck_job):
    job_id, port = stuck_job
    # The node's port is this machine's own: said, nothing relayed.
    here = cli("forward", job_id, str(port + 1), "--node", "1")
    assert here.rc == 0 and "already on this machine" in here.out
    proc = subprocess.Popen(
        [sys.executable, "-m", "anylaunch", "forward", job_id, str(port + 1), "--node", "1",
         "--local-port", "0", "--json"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "ANYLAUNCH_HOME": str(home)},
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        text = ""
        while not text.rstrip().endswith("}"):
            text += proc.stdout.readline()
        opened = json.loads(text)
        assert opened["relayed"] and opened["local_port"] not in (0, port + 1)
        with urllib.request.urlopen(opened["url"], timeout=10) as page:
            assert page.read() == b"node 1\n"
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0


def test_exec_on_a_job_that_ended_says_so_in_one_line(cli, write):
    path = write("command: [python, -c, pass]\nlauncher: none\n")
    job = cli("run", str(path), "--json").json()
    result = cli("exec", job["id"], "--", "true")
    assert result.rc == 2 and "SUCCEEDED: nothing of it runs" in result.err
    assert len(result.err.strip().splitlines()) == 1


def test_a_2x2_job_stuck_in_a_loop_is_dumped_stopped_and_failed_by_the_watchdog(
    cli, write, home, torch
):
    path = write(
        f"""
        name: hung
        command: python {PROGRAMS / "stuck.py"}
        nodes: 2
        ranks_per_node: 2
        watchdog: {{idle: 20s}}
        env:
          OMP_NUM_THREADS: 1
          HF_TOKEN: ${{HF_TOKEN}}
        """
    )
    result = cli("run", str(path), "--json", env={"HF_TOKEN": SECRET}, timeout=300)
    job = result.json()
    assert result.rc == 1 and (job["state"], job["exit_code"]) == ("FAILED", 99)
    assert job["detail"].startswith("hang: no rank wrote output for ")
    log = Path(job["job_dir"], "logs", "node-0.log").read_text()
    head = re.search(
        r"^anylaunch: hang: no rank wrote output for (\d+)s; the Python stack of every rank"
        r" follows$",
        log,
        re.M,
    )
    assert head is not None and int(head[1]) >= 20
    blocks = re.split(r"^anylaunch: hang: rank (\d) \(node (\d), pid \d+\)$", log, flags=re.M)[1:]
    found = {
        (int(r), int(n)): body
        for r, n, body in zip(blocks[::3], blocks[1::3], blocks[2::3], strict=True)
    }
    assert set(found) == {(0, 0), (1, 0), (2, 1), (3, 1)}
    before_hang = log[: head.start()] + Path(job["job_dir"], "logs", "node-1.log").read_text()
    for (rank, _), body in found.items():
        stack = body.split("anylaunch: hang:")[0]
        # A rank that said it was ready sits in the loop; on a busy machine one may still
        # be importing torch after 20 silent seconds, and its stack must show exactly that.
        where = STUCK if f"ready rank={rank} " in before_hang else "stuck.py"
        assert where in stack, stack
    assert SECRET not in log
    assert cli("status", job["id"], "--json").json()["state"] == "FAILED"
