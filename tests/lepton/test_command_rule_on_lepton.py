"""The command rule on Lepton (the emulator): a string is a shell line on each replica, a
list reaches the program exactly as written, and the dry-run leaves `$NODE_RANK` for the
replica's shell."""

from __future__ import annotations

import json
import re
from pathlib import Path

from lepton_helpers import MOUNT, NODE_GROUP, on_volume, volume_dir

PY = "python3"  # the images' interpreter; replicas do not see this machine's venv
PROGRAMS = Path(__file__).resolve().parents[1] / "programs"
# Replicas see only their image and mounts: programs go on the node group's volume.
ON_VOLUME = f"{MOUNT}/programs"
RAW_TORCHRUN = (
    "torchrun --nnodes=$NNODES --nproc-per-node=2 --node-rank=$NODE_RANK"
    f" --master-addr=$MASTER_ADDR --master-port=$MASTER_PORT {ON_VOLUME}/gloo_world.py"
)


def test_the_raw_torchrun_line_runs_two_replicas_of_two_ranks(lcli, write, emulator, torch):
    on_volume(emulator, PROGRAMS / "gloo_world.py")
    path = write(
        f"""
        image: nvcr.io/nvidia/pytorch:25.08-py3
        launcher: none
        nodes: 2
        command: {RAW_TORCHRUN}
        env:
          OMP_NUM_THREADS: 1
        lepton: {{dedicated_node_group: {NODE_GROUP}}}
        """
    )
    dry = lcli("run", str(path), "--dry-run")
    assert dry.rc == 0, dry.err
    assert RAW_TORCHRUN in dry.out and "'--node-rank=$NODE_RANK'" not in dry.out
    # An NGC key lets the workspace pull from nvcr.io.
    result = lcli("run", str(path), "--json", env={"NGC_KEY": "ngc-k"}, timeout=300)
    assert result.rc == 0, result.err + result.out
    job = result.json()
    assert job["state"] == "SUCCEEDED", job
    logs = lcli("logs", job["id"]).out
    found = set(re.findall(r"\[node (\d)\] rank (\d) node (\d) local \d world size 4 sum 4", logs))
    assert found == {("0", "0", "0"), ("0", "1", "0"), ("1", "2", "1"), ("1", "3", "1")}, logs


def test_a_list_is_literal_and_a_string_expands_on_the_replica(lcli, write, emulator):
    on_volume(emulator, PROGRAMS / "show_argv.py")
    # On the shared volume, so this machine would see it if a shell ever ran the touch.
    marker = volume_dir(emulator) / "PWNED"
    literal = [PY, f"{ON_VOLUME}/show_argv.py", f"$(touch {MOUNT}/PWNED)", "$HOME", "`id`"]
    job = {
        "image": "python:3.11",
        "launcher": "none",
        "command": literal,
        "lepton": {"dedicated_node_group": NODE_GROUP},
    }
    path = write(json.dumps(job).replace("$", "$$"))
    result = lcli("run", str(path), "--json", timeout=300)
    assert result.rc == 0, result.err + result.out
    assert f"ARGV {json.dumps(literal[2:])}" in lcli("logs", result.json()["id"]).out
    assert not marker.exists()

    show = f"{PY} {ON_VOLUME}/show_argv.py"
    path = write(
        f"image: python:3.11\nlauncher: none\nnodes: 2\n"
        f"lepton: {{dedicated_node_group: {NODE_GROUP}}}\n"
        # PATH names itself: the replica's own PATH, extended (`tr` is found through it).
        f"env: {{WHERE: 'rank-$NODE_RANK-of-$NNODES', RAW: '$$(touch PWNED)',"
        " PATH: '/opt/none/bin:$PATH'}\n"
        f'command: {show} $NODE_RANK "$WHERE" "$RAW" | tr a-z A-Z\n',
        "string.yaml",
    )
    result = lcli("run", str(path), "--json", timeout=300)
    assert result.rc == 0, result.err + result.out
    logs = lcli("logs", result.json()["id"]).out
    assert '[node 1] ARGV ["1", "RANK-1-OF-2", "$(TOUCH PWNED)"]' in logs, logs
