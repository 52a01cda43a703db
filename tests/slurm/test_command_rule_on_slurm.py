"""The command rule on the devstack Slurm cluster: the raw torchrun line runs on two
nodes, a list reaches the program literally, a string and env: values expand per node."""

from __future__ import annotations

import json
import os
import re
import socket
import sys
from pathlib import Path

import pytest

PY = sys.executable
PROGRAMS = Path(__file__).resolve().parents[1] / "programs"
# Someone who activated the venv: torchrun is on PATH (sbatch --export=ALL carries it).
VENV_PATH = {"PATH": f"{Path(PY).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"}


@pytest.fixture
def slurm(cli_inproc, devstack, tmp_path):
    """The CLI, run from the job's folder (the job's working directory on the nodes)."""

    def run(*args: str, timeout: float = 240):
        env = {"SLURM_CONF": devstack["SLURM_CONF"], **VENV_PATH}
        return cli_inproc(*args, env=env, cwd=tmp_path, timeout=timeout)

    return run


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_raw_torchrun_line_runs_two_nodes_of_two_ranks(slurm, write, tmp_path, torch):
    raw = (
        "torchrun --nnodes=$NNODES --nproc-per-node=2 --node-rank=$NODE_RANK"
        " --master-addr=$MASTER_ADDR --master-port=$MASTER_PORT train.py"
    )
    (tmp_path / "train.py").write_text((PROGRAMS / "gloo_world.py").read_text())
    path = write(
        f"launcher: none\nnodes: 2\ncommand: {raw}\n"
        f"env: {{OMP_NUM_THREADS: 1}}\nslurm: {{master_port: {free_port()}}}\n"
    )
    dry = slurm("run", str(path), "--dry-run")
    assert dry.rc == 0, dry.err
    assert raw in dry.out and "'--node-rank=$NODE_RANK'" not in dry.out
    result = slurm("run", str(path), "--json")
    assert result.rc == 0, result.out + result.err
    logs = slurm("logs", result.json()["id"]).out
    found = set(re.findall(r"\[node (\d)\] rank (\d) node (\d) local \d world size 4 sum 4", logs))
    assert found == {("0", "0", "0"), ("0", "1", "0"), ("1", "2", "1"), ("1", "3", "1")}, logs


def test_a_list_is_literal_and_a_string_expands_on_each_node(slurm, write, tmp_path):
    marker = tmp_path / "PWNED"
    literal = [PY, str(PROGRAMS / "show_argv.py"), f"$(touch {marker})", "$HOME", "`id`"]
    job = {"launcher": "none", "command": literal, "slurm": {"master_port": free_port()}}
    path = write(json.dumps(job).replace("$", "$$"))
    result = slurm("run", str(path), "--json")
    assert result.rc == 0, result.out + result.err
    assert f"ARGV {json.dumps(literal[2:])}" in slurm("logs", result.json()["id"]).out
    assert not marker.exists()

    show = f"{PY} {PROGRAMS / 'show_argv.py'}"
    path = write(
        f"launcher: none\nnodes: 2\nslurm: {{master_port: {free_port()}}}\n"
        "env: {TMPX: '/tmp/t_$SLURM_JOB_ID', RAW: '$$(touch PWNED)'}\n"
        f'command: {show} $NODE_RANK $SLURM_JOB_ID "$TMPX" "$RAW" | tr a-z A-Z\n',
        "string.yaml",
    )
    result = slurm("run", str(path), "--json")
    assert result.rc == 0, result.out + result.err
    job_id = result.json()["native_id"]
    logs = slurm("logs", result.json()["id"]).out
    assert f'[node 1] ARGV ["1", "{job_id}", "/TMP/T_{job_id}", "$(TOUCH PWNED)"]' in logs, logs
