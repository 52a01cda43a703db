"""The rendered `run` script in real bash: the resume contract and the multi-node contract.

SkyPilot runs `run` once per node with SKYPILOT_NODE_RANK / NUM_NODES / NODE_IPS set; a
managed job's recovery runs it again on a new cluster. These tests do exactly that with
real processes: a killed attempt, then the next one; two torchrun agents rendezvousing.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from anylaunch import api
from anylaunch.jobfile import loader
from anylaunch.node import runtime
from anylaunch.store import Store
from conftest import PROGRAMS, ROOT, needs_sky

pytestmark = needs_sky


def rendered_run(path: Path, store_root: Path) -> str:
    plan = api.dry_run(loader.load(path, environ={}), "skypilot", store=Store(store_root))
    return plan.payload["task"]["run"]


def node_env(rank: int, nodes: int, ips: str = "127.0.0.1") -> dict[str, str]:
    return {
        **os.environ,
        "SKYPILOT_NODE_RANK": str(rank),
        "SKYPILOT_NUM_NODES": str(nodes),
        "SKYPILOT_NODE_IPS": "\n".join([ips] * nodes),
    }


def newest(directory: Path) -> str:
    """What the shipped in-job runtime answers, under python3 with its stdlib only."""
    shipped = directory.parent / runtime.FILE_NAME
    shipped.write_bytes(runtime.zipapp())
    out = subprocess.run(
        ["python3", "-I", "-S", str(shipped), "newest", str(directory)],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def test_newest_complete_checkpoint_skips_partial_saves(tmp_path, spawns):
    ckpt = tmp_path / "ckpt"
    assert newest(ckpt) == ""  # no directory yet: a first attempt
    ckpt.mkdir()
    for step in (90, 100):  # torch DCP writes .metadata last: the save is whole
        (ckpt / f"epoch_0_step_{step}" / "model").mkdir(parents=True)
        (ckpt / f"epoch_0_step_{step}" / "model" / "__0_0.distcp").write_text("w")
        (ckpt / f"epoch_0_step_{step}" / "model" / ".metadata").write_text("m")
    (ckpt / "epoch_0_step_110" / "model").mkdir(parents=True)  # cut off mid-write
    (ckpt / "epoch_0_step_110" / "model" / "__0_0.distcp").write_text("half")
    (ckpt / "epoch_0_step_120.tmp").write_text("cut off")
    (ckpt / "epoch_0_step_130").mkdir()
    (ckpt / "epoch_0_step_130" / ".complete").write_text("")
    (ckpt / "epoch_0_step_130" / ".incomplete").write_text("")  # the veto wins
    assert newest(ckpt) == f"{ckpt}/epoch_0_step_100"


def test_latest_pointer_wins_as_symlink_text_or_directory(tmp_path, spawns):
    for kind in ("symlink", "text"):
        ckpt = tmp_path / kind
        (ckpt / "step_5").mkdir(parents=True)
        (ckpt / "step_5" / "w").write_text("w")
        (ckpt / "step_9").mkdir()
        (ckpt / "step_9" / "w").write_text("w")
        if kind == "symlink":
            (ckpt / "LATEST").symlink_to(ckpt / "step_5")
        else:
            (ckpt / "latest").write_text("step_5\n")
        assert newest(ckpt) == f"{ckpt}/step_5"
    folder = tmp_path / "dir" / "latest"
    folder.mkdir(parents=True)
    assert newest(tmp_path / "dir") == str(folder)


def test_an_attempt_killed_after_checkpoint_n_is_resumed_from_n(write, tmp_path):
    """Attempt 1 is SIGKILLed (a preemption) after writing step-3 and while step-4 is
    half-written; attempt 2 - the same rendered script - starts from step-3, and the
    recipe it reads says restore_from.path: <step-3>."""
    ckpt = tmp_path / "ckpt"
    path = write(
        f"""
        name: resume-me
        command: python {PROGRAMS}/train.py 8 0.3 -c {{config}}
        launcher: none
        checkpoint:
          dir: {ckpt}
        restore_from:
          path: {ckpt}/latest
        skypilot:
          cloud: aws
          use_spot: true
        """
    )
    run = rendered_run(path, tmp_path / "home")
    first = subprocess.Popen(
        ["bash", "-c", run],
        env=node_env(0, 1),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while not (ckpt / "step-3.ckpt").exists():
        assert time.monotonic() < deadline and first.poll() is None, "attempt 1 never saved step 3"
        time.sleep(0.02)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    for extra in ckpt.glob("step-*.ckpt"):  # a step that landed in the kill window
        if int(extra.stem.split("-")[1]) > 3:
            extra.unlink()
    (ckpt / "step-4.tmp").write_text("half")
    first_out = first.stdout.read()
    assert "start=0 resume_from=None" in first_out
    assert f"recipe path: '{ckpt}/latest'" in first_out  # nothing yet: the recipe's own

    second = subprocess.run(
        ["bash", "-c", run], env=node_env(0, 1), capture_output=True, text=True, timeout=60
    )
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"anylaunch: resuming from {ckpt}/step-3.ckpt" in second.stdout
    assert f"start=3 resume_from={ckpt}/step-3.ckpt" in second.stdout
    assert f"recipe path: '{ckpt}/step-3.ckpt'" in second.stdout
    assert "step 3\n" not in second.stdout and "step 4\n" in second.stdout
    assert second.stdout.rstrip().endswith("done")


def test_launcher_none_gets_the_rendezvous_contract_from_skypilot_variables(write, tmp_path):
    path = write(
        """
        command: env
        launcher: none
        skypilot:
          cloud: kubernetes
          accelerators: "A100:4"
          num_nodes: 2
        """
    )
    run = rendered_run(path, tmp_path / "home")
    env = {**node_env(1, 2), "SKYPILOT_NODE_IPS": "10.1.0.7\n10.1.0.8"}
    out = subprocess.run(["bash", "-c", run], env=env, capture_output=True, text=True, check=True)
    seen = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
    assert seen["MASTER_ADDR"] == "10.1.0.7" and seen["MASTER_PORT"] == "12375"
    assert seen["NODE_RANK"] == "1" and seen["NNODES"] == "2"
    assert seen["NUM_GPU_PER_NODE"] == "4" and seen["WORLD_SIZE"] == "2"


def test_srun_launcher_is_refused_with_the_fix(write):
    from anylaunch.errors import ConfigError

    path = write("command: python t.py\nlauncher: srun\nskypilot:\n  cloud: aws\n")
    with pytest.raises(ConfigError) as err:
        api.dry_run(loader.load(path, environ={}), "skypilot")
    assert err.value.line == 2 and "--backend slurm" in err.value.message


def test_two_nodes_rendezvous_through_torchrun_with_the_rendered_script(
    write, tmp_path, torch, spawns
):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    path = write(
        f"""
        command: {ROOT}/.venv/bin/python {ROOT}/examples/ddp_demo.py --steps 2 --checkpoint-dir {tmp_path}/c
        nodes: 2
        ranks_per_node: 2
        env:
          OMP_NUM_THREADS: 1
        skypilot:
          cloud: kubernetes
          master_port: {port}
        """
    )
    run = rendered_run(path, tmp_path / "home")
    agents = [
        subprocess.Popen(
            ["bash", "-c", run],
            env=node_env(rank, 2),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in (0, 1)
    ]
    outs = [a.communicate(timeout=120)[0] for a in agents]
    assert [a.returncode for a in agents] == [0, 0], outs
    assert "rank=2 local_rank=0 node_rank=1 world_size=4" in outs[1]
    assert f"master=127.0.0.1:{port}" in outs[0] and "step 2 loss" in outs[0]
