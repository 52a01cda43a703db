"""The command rule on the local backend: a string is a shell line on each node, a list
runs exactly as given. The raw torchrun line people write for Lepton runs unchanged.

The same checks run on Slurm (tests/slurm/test_command_rule_on_slurm.py), on the Lepton
emulator (tests/lepton/test_command_rule_on_lepton.py) and through SkyPilot
(tests/skypilot/test_e2e_slurm.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

PY = sys.executable
PROGRAMS = Path(__file__).resolve().parent / "programs"
# The environment of someone who activated the venv: torchrun is on PATH.
VENV_PATH = {"PATH": f"{Path(PY).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
RAW_TORCHRUN = (
    "torchrun --nnodes=$NNODES --nproc-per-node=2 --node-rank=$NODE_RANK"
    " --master-addr=$MASTER_ADDR --master-port=$MASTER_PORT train.py"
)


def ranks_in(logs: str) -> set[tuple[str, str, str]]:
    """(log's node, rank, NODE_RANK the rank saw) for every rank that reached world size 4."""
    found = re.findall(r"\[node (\d)\] rank (\d) node (\d) local \d world size 4 sum 4", logs)
    return set(found)


def test_the_raw_torchrun_line_runs_two_nodes_of_two_ranks(cli, write, tmp_path, torch):
    shutil.copy(PROGRAMS / "gloo_world.py", tmp_path / "train.py")
    path = write(f"launcher: none\nnodes: 2\ncommand: {RAW_TORCHRUN}\n")
    dry = cli("run", str(path), "--dry-run", cwd=tmp_path, env=VENV_PATH)
    assert dry.rc == 0, dry.err
    assert RAW_TORCHRUN in dry.out and "'--node-rank=$NODE_RANK'" not in dry.out
    result = cli("run", str(path), "--json", cwd=tmp_path, env=VENV_PATH, timeout=300)
    assert result.rc == 0, result.err
    job = result.json()
    assert job["state"] == "SUCCEEDED", job
    logs = cli("logs", job["id"]).out
    assert ranks_in(logs) == {("0", "0", "0"), ("0", "1", "0"), ("1", "2", "1"), ("1", "3", "1")}


def test_a_list_command_is_literal_and_a_string_command_expands(cli, write, tmp_path):
    marker = tmp_path / "PWNED"
    literal = [PY, str(PROGRAMS / "show_argv.py"), f"$(touch {marker})", "$HOME", "`id`"]
    path = write(json.dumps({"launcher": "none", "command": literal}).replace("$", "$$"))
    result = cli("run", str(path), "--json", cwd=tmp_path)
    assert result.rc == 0, result.err
    logs = cli("logs", result.json()["id"]).out
    assert f"ARGV {json.dumps(literal[2:])}" in logs
    assert not marker.exists()

    line = f"{PY} {PROGRAMS / 'show_argv.py'} $NNODES/$NODE_RANK $(echo sub) | tr a-z A-Z"
    path = write(f"launcher: none\ncommand: {line}\n", "string.yaml")
    result = cli("run", str(path), "--json", cwd=tmp_path)
    assert result.rc == 0, result.err
    logs = cli("logs", result.json()["id"]).out
    assert 'ARGV ["1/0", "SUB"]' in logs
