"""A running job on the devstack Slurm cluster reached through srun --overlap: exec in a
node's environment, every rank's stack, a forwarded port; and the hang watchdog running
inside the allocation."""

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

from helpers import free_port, free_port_pair, wait_until

PROGRAMS = Path(__file__).resolve().parents[1] / "programs"
STUCK = "stuck_in_the_loop"
# A 2x2 torch job on the devstack can take minutes to start beside other work.
pytestmark = pytest.mark.timeout(600)


def job_file(write, body: str) -> Path:
    """Our interpreter on the nodes, and a rendezvous port of the job's own (the nodes
    share one host)."""
    return write(body.replace("MASTER", str(free_port())).replace("PY", sys.executable))


@pytest.fixture
def stuck_on_slurm(cli, cli_inproc, write, slurm_conf, leave_no_job_behind, torch):
    port = free_port_pair()
    path = job_file(
        write,
        f"""
        name: stuck
        command: python {PROGRAMS / "stuck.py"}
        nodes: 2
        ranks_per_node: 2
        env:
          OMP_NUM_THREADS: 1
          SERVE_PORT: {port}
        slurm:
          python: PY
          master_port: MASTER
        """,
    )
    job = cli("run", str(path), "--detach", "--json").json()
    wait_until(lambda: cli_inproc("logs", job["id"]).out.count("ready rank=") == 4, 300, "4 ranks")
    yield job["id"], port
    cli("cancel", job["id"])


def test_exec_and_stack_reach_every_node_through_srun(cli, stuck_on_slurm):
    job_id, _ = stuck_on_slurm
    result = cli("exec", job_id, "--node", "1", "--", "printenv", "NODE_RANK", "SLURMD_NODENAME")
    assert (result.rc, result.out) == (0, "1\nn2\n"), result.err
    captured = cli("exec", job_id, "--json", "--", "sh", "-c", "exit 4").json()
    assert captured["exit_code"] == 4 and "srun --jobid=" in captured["via"]
    ranks = cli("stack", job_id, "--json").json()["ranks"]
    assert [(r["rank"], r["node"], r["host"]) for r in ranks] == [
        (0, 0, "n1"), (1, 0, "n1"), (2, 1, "n2"), (3, 1, "n2"),
    ]  # fmt: skip
    assert all(STUCK in (r["stack"] or "") for r in ranks), ranks


def test_forward_reaches_a_nodes_port_through_a_step(home, stuck_on_slurm):
    job_id, port = stuck_on_slurm
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
        assert opened["relayed"] and "srun" in opened["via"]
        with urllib.request.urlopen(opened["url"], timeout=30) as page:
            assert page.read() == b"node 1\n"
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0


def test_the_watchdog_inside_the_allocation_dumps_and_stops_a_hung_job(
    cli, write, slurm_conf, leave_no_job_behind, torch
):
    path = job_file(
        write,
        f"""
        name: hung
        command: python {PROGRAMS / "stuck.py"}
        nodes: 2
        ranks_per_node: 2
        watchdog: {{idle: 20s}}
        env:
          OMP_NUM_THREADS: 1
        slurm:
          python: PY
          master_port: MASTER
        """,
    )
    result = cli("run", str(path), "--json", timeout=300)
    job = result.json()
    assert (job["state"], job["exit_code"]) == ("FAILED", 99), job
    log = Path(job["job_dir"], "logs", "node-0.log").read_text()
    head = re.search(
        r"^anylaunch: hang: no rank wrote output for \d+s; the Python stack", log, re.M
    )
    assert head is not None
    blocks = re.split(r"^anylaunch: hang: rank (\d) \(node (\d), pid \d+\)$", log, flags=re.M)
    found = {
        (r, n): body for r, n, body in zip(blocks[1::3], blocks[2::3], blocks[3::3], strict=True)
    }
    assert sorted(found) == [("0", "0"), ("1", "0"), ("2", "1"), ("3", "1")]
    before_hang = log[: head.start()] + Path(job["job_dir"], "logs", "node-1.log").read_text()
    for (rank, _), body in found.items():
        # A rank still importing torch after 20 silent seconds (a busy machine) must show
        # that import; one that said it was ready must sit in the loop.
        where = STUCK if f"ready rank={rank} " in before_hang else "stuck.py"
        assert where in body.split("anylaunch: hang:")[0], body
