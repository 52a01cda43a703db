"""End to end through real SkyPilot: `anylaunch run --backend skypilot` on the devstack Slurm.

SkyPilot drives the devstack's Slurm cluster over SSH (scripts/devstack.d/skypilot), the
unmanaged `sky launch` path: provisioning an allocation, runtime set-up, the job, its
logs, cancel, and a relaunch that resumes from the cancelled attempt's checkpoint.
Managed jobs cannot run offline (their controller needs the internet); their SDK
boundary is tested in test_render.py.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import sys
import time
from pathlib import Path

import pytest

from anylaunch.store import Store
from conftest import PROGRAMS, dedent, needs_sky
from helpers import free_port, plan_text

# SkyPilot provisions an allocation and installs its runtime on it: about 40 s per launch
# on a quiet machine, much more when the 2 cores are shared.
pytestmark = [needs_sky, pytest.mark.timeout(600)]


@pytest.fixture
def skycli(cli, skystack):
    def run(*args: str, timeout: float = 300):
        return cli(*args, env=skystack, timeout=timeout)

    return run


def job_file(path: Path, cluster: str, body: str, master_port: int | None = None) -> Path:
    port = f"  master_port: {master_port}\n" if master_port else ""
    path.write_text(
        dedent(body)
        + dedent(
            f"""
            skypilot:
              cloud: slurm
              region: devstack
              cluster_name: {cluster}
            """
        )
        + port
    )
    return path


def wait_for(predicate, what: str, timeout: float = 240):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(1)
    pytest.fail(f"timed out waiting for {what}")


# Minutes of SkyPilot provisioning on the devstack: with the other long rehearsals.
@pytest.mark.slow
def test_job_runs_is_cancelled_and_its_relaunch_resumes_from_the_checkpoint(
    skycli, cluster, tmp_path, home
):
    ckpt = tmp_path / "ckpt"
    path = job_file(
        tmp_path / "train.yaml",
        cluster,
        f"""
        name: sky-train
        command: {sys.executable} {PROGRAMS}/train.py 40 1.0 -c {{config}}
        launcher: none
        env:
          HF_TOKEN: ${{HF_TOKEN}}
        checkpoint:
          dir: {ckpt}
        restore_from:
          path: {ckpt}/latest
        hooks:
          pre: 'echo "node=$NODE_RANK/$NNODES master=$MASTER_ADDR:$MASTER_PORT token=$${{#HF_TOKEN}}"'
        """,
    )
    token = "hf_e2e_" + secrets.token_hex(8)
    dry = skycli_run(skycli, path, token, "--dry-run")
    first = skycli_run(skycli, path, token, "--detach")
    assert first.rc == 0, first.err
    job = first.json()
    assert job["native_id"].startswith("request/")
    # The dry-run showed the task that was sent.
    shown = dry.json()["plan"]
    stored = Store(home).get(job["id"]).plan
    assert plan_text(shown, shown["job_id"]) == plan_text(stored, job["id"])
    wait_for(lambda: (ckpt / "step-2.ckpt").exists(), "the first attempt's step 2", timeout=300)
    cancelled = skycli("cancel", job["id"], "--json")
    assert cancelled.json()["state"] == "CANCELLED", cancelled.out + cancelled.err
    status = skycli("status", job["id"], "--json").json()
    assert status["native_id"] == f"{cluster}/1"
    saved = max(int(p.stem.split("-")[1]) for p in ckpt.glob("step-*.ckpt"))
    time.sleep(2)  # cancelled means stopped: no step may land after it
    assert max(int(p.stem.split("-")[1]) for p in ckpt.glob("step-*.ckpt")) == saved

    path.write_text(path.read_text().replace("train.py 40 1.0", "train.py 6 0.2"))
    second = skycli_run(skycli, path, token)
    assert second.rc == 0, second.err + second.out
    done = second.json()
    assert done["state"] == "SUCCEEDED" and done["exit_code"] == 0
    assert done["native_id"] == f"{cluster}/2"  # the same cluster, its second job
    logs = skycli("logs", done["id"], "--node", "0").out
    assert f"node=0/1 master=127.0.0.1:12375 token={len(token)}" in logs
    assert f"anylaunch: resuming from {ckpt}/step-{saved}.ckpt" in logs
    assert f"recipe path: '{ckpt}/step-{saved}.ckpt'" in logs
    assert re.search(rf"start={saved} ", logs) and logs.rstrip().endswith("done")
    assert [j["id"] for j in skycli("ps", "--json").json()] == [done["id"], job["id"]]
    leaked = [p for p in home.rglob("*") if p.is_file() and token.encode() in p.read_bytes()]
    assert leaked == []  # store, plans, task.yaml: the token only travelled to SkyPilot


def skycli_run(skycli, path: Path, token: str, *extra: str):
    """`anylaunch run` with a secret in the submitting environment only."""
    os.environ["HF_TOKEN"] = token
    try:
        return skycli("run", str(path), "--json", *extra)
    finally:
        os.environ.pop("HF_TOKEN", None)


@pytest.mark.slow
def test_two_nodes_get_their_ranks_and_the_head_as_master(skycli, cluster, tmp_path):
    path = job_file(
        tmp_path / "two.yaml",
        cluster,
        """
        name: sky-two
        command: echo "rank=$NODE_RANK nnodes=$NNODES world=$WORLD_SIZE master=$MASTER_ADDR host=$SLURMD_NODENAME"
        launcher: none
        nodes: 2
        """,
    )
    result = skycli("run", str(path), "--json")
    assert result.rc == 0, result.err + result.out
    job = result.json()
    assert job["state"] == "SUCCEEDED"
    node1 = skycli("logs", job["id"], "--node", "1").out
    assert "rank=1 nnodes=2 world=2 master=127.0.0.1" in node1
    everything = skycli("logs", job["id"]).out
    assert "[node 0] rank=0 nnodes=2" in everything
    assert {"host=n1", "host=n2"} <= set(re.findall(r"host=n\d", everything))


@pytest.mark.slow
def test_the_raw_torchrun_line_runs_two_nodes_and_a_list_stays_literal(skycli, cluster, tmp_path):
    """The command rule through SkyPilot: the raw torchrun line expands on each node (the
    env value `$PATH` too), and a list reaches the program word for word."""
    gloo = Path(__file__).resolve().parents[1] / "programs" / "gloo_world.py"
    raw = (
        "torchrun --nnodes=$NNODES --nproc-per-node=2 --node-rank=$NODE_RANK"
        f" --master-addr=$MASTER_ADDR --master-port=$MASTER_PORT {gloo}"
    )
    path = job_file(
        tmp_path / "raw.yaml",
        cluster,
        f"""
        name: sky-raw
        command: {raw}
        launcher: none
        nodes: 2
        env:
          PATH: {Path(sys.executable).parent}:$PATH
          OMP_NUM_THREADS: 1
        """,
        master_port=free_port(),
    )
    dry = skycli("run", str(path), "--dry-run")
    assert dry.rc == 0, dry.err
    assert raw in dry.out and "'--node-rank=$NODE_RANK'" not in dry.out
    result = skycli("run", str(path), "--json")
    assert result.rc == 0, result.err + result.out
    job = result.json()
    assert job["state"] == "SUCCEEDED", job
    logs = skycli("logs", job["id"]).out
    found = set(re.findall(r"\[node (\d)\] rank (\d) node (\d) local \d world size 4 sum 4", logs))
    assert found == {("0", "0", "0"), ("0", "1", "0"), ("1", "2", "1"), ("1", "3", "1")}, logs

    marker = tmp_path / "PWNED"
    show = Path(__file__).resolve().parents[1] / "programs" / "show_argv.py"
    literal = [sys.executable, str(show), f"$(touch {marker})", "$HOME", "`id`"]
    listed = tmp_path / "list.yaml"
    listed.write_text(
        path.read_text()
        .replace(f"command: {raw}", f"command: {json.dumps(literal).replace('$', '$$')}")
        .replace("name: sky-raw", "name: sky-list")
    )
    result = skycli("run", str(listed), "--json")
    assert result.rc == 0, result.err + result.out
    assert result.json()["state"] == "SUCCEEDED"
    assert f"[node 1] ARGV {json.dumps(literal[2:])}" in skycli("logs", result.json()["id"]).out
    assert not marker.exists()
