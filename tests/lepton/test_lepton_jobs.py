"""Real jobs through `anylaunch run --backend lepton`: 2-node DDP, eviction, cancel."""

from __future__ import annotations

import re

import pytest
from lepton_helpers import MOUNT, NODE_GROUP, PROGRAMS, ROOT, on_volume, volume_dir, wait_until

from anylaunch.observe import watch
from anylaunch.sdk import LeptonSDK

# The program reaches the replicas on the node group's Lustre volume, like on Lepton.
DEMO = f"{MOUNT}/programs/ddp_demo.py --steps 5 --checkpoint-dir {MOUNT}/ckpt"
# The raw torchrun line written for non-TAO containers: a string command is a shell line,
# so the node's shell expands the rendezvous variables.
RAW_TORCHRUN = (
    "torchrun --nnodes=$NNODES --nproc-per-node=2 --node-rank=$NODE_RANK"
    " --master-addr=$MASTER_ADDR --master-port=$MASTER_PORT " + DEMO
)


@pytest.mark.parametrize(
    ("launcher", "command"),
    [("torchrun", f"python {DEMO}"), ("none", RAW_TORCHRUN)],
    ids=["launcher-torchrun", "raw-torchrun-command"],
)
def test_two_node_ddp_job_succeeds_and_each_node_has_its_ranks(
    lcli, write, emulator, launcher, command, torch
):
    on_volume(emulator, ROOT / "examples" / "ddp_demo.py")
    path = write(
        f"""
        name: ddp-demo
        image: nvcr.io/nvidia/pytorch:25.08-py3
        command: {command}
        launcher: {launcher}
        nodes: 2
        ranks_per_node: 2
        env:
          OMP_NUM_THREADS: 1
        lepton: {{dedicated_node_group: {NODE_GROUP}}}
        """
    )
    result = lcli("run", str(path), "--backend", "lepton", "--json", env={"NGC_KEY": "ngc-k"})
    job = result.json()
    assert result.rc == 0, result.err + lcli("logs", job["id"]).out
    assert job["state"] == "SUCCEEDED" and job["exit_code"] == 0
    node1 = lcli("logs", job["id"], "--node", "1").out
    ranks = re.findall(r"rank=(\d) local_rank=\d node_rank=(\d) world_size=4 master=(\S+)", node1)
    assert sorted(r for r, _, _ in ranks) == ["2", "3"] and {n for _, n, _ in ranks} == {"1"}
    assert {m for _, _, m in ranks} == {f"worker-0.{job['native_id']}-job-svc:29400"}
    everything = lcli("logs", job["id"]).out
    assert "[node 0] step 5 loss" in everything
    replicas = LeptonSDK().get_job_replicas(job["id"])
    assert len(replicas) == 2
    assert {r["status"]["node"]["name"] for r in replicas} and all(
        "readiness_issue" not in r["status"] for r in replicas
    )
    assert emulator.world.pull_secrets["anylaunch-ngc"]["registry_server"] == "nvcr.io"


def test_tao_style_command_runs_once_per_node_and_meets_its_peer(lcli, write, emulator):
    programs = on_volume(emulator, PROGRAMS / "tao_rendezvous.py")
    path = write(
        f"""
        name: tao-style
        image: python:3.11
        command: python3 {programs}/tao_rendezvous.py
        launcher: none
        lepton:
          num_nodes: 2
          gpu_count: 8
          dedicated_node_group: {NODE_GROUP}
        """
    )
    result = lcli("run", str(path), "--json")
    assert result.rc == 0, result.err
    job = result.json()
    native = job["native_id"]
    node0, node1 = (lcli("logs", job["id"], "--node", str(i)).out for i in (0, 1))
    svc = f"{native}-job-svc"
    common = "WORLD_SIZE=2 NUM_GPU_PER_NODE=8 NNODES=2"
    assert f"{common} NODE_RANK=0 MASTER_ADDR=worker-0.{svc} MASTER_PORT=29400" in node0
    assert f"WORKER_ADDRS=worker-1.{svc}" in node0
    assert "master heard from node1" in node0 and "reached the master" in node1


def evicting_job(write, emulator, retries: int = 2, steps: int = 10):
    """A stdlib-only program in the bare image, its checkpoints on the Lustre volume."""
    programs = on_volume(emulator, PROGRAMS / "steps.py")
    return write(
        f"""
        name: evict-me
        image: python:3.11
        command: python3 {programs}/steps.py {steps} 0.2
        launcher: none
        checkpoint:
          dir: {MOUNT}/ckpt
        lepton:
          resource_shape: cpu.small
          dedicated_node_group: {NODE_GROUP}
          can_be_preempted: true
          eviction_retries: {retries}
        """
    )


def test_evicted_job_resumes_from_its_newest_checkpoint_as_one_job(lcli, write, emulator):
    path = evicting_job(write, emulator, steps=40)
    job = lcli("run", str(path), "--detach", "--json").json()
    # Evicted once it has saved a step: a fixed delay could, on a busy machine, come before
    # the program's first step, leaving nothing to resume from.
    ckpt = volume_dir(emulator, f"{MOUNT}/ckpt")
    wait_until(lambda: any(ckpt.glob("step-*.ckpt")), timeout=120, what="a first checkpoint")
    emulator.add_fault(kind="evict", job="evict-me-*", after_s=0, count=1)

    def ended():
        view = lcli("status", job["id"], "--json").json()
        return view if view["state"] not in ("PENDING", "STARTING", "RUNNING") else None

    job = wait_until(ended, timeout=240, interval=0.5, what="the job's end")
    assert job["state"] == "SUCCEEDED", job
    assert [j["id"] for j in lcli("ps", "--json").json()] == [job["id"]]
    events = job["events"]
    resubmits = [e["detail"] for e in events if "attempt 2" in (e["detail"] or "")]
    assert len(resubmits) == 1 and "Preempted" in resubmits[0], events
    assert job["native_id"].startswith(f"evict-me-{job['id']}-r2-")
    logs = lcli("logs", job["id"]).out
    resumed = re.search(r"resumed from step (\d+) \(attempt 2\)", logs)
    assert resumed and int(resumed.group(1)) >= 1, logs
    before = logs.split("--- anylaunch: attempt 2")[0]
    assert f"step {resumed.group(1)}" in before  # it resumed from the last step it saved
    assert logs.rstrip().endswith("done") and "step 40" in logs
    assert (ckpt / "step-40.ckpt").exists()  # on the volume


def test_eviction_without_budget_left_ends_preempted(lcli, write, emulator):
    emulator.add_fault(kind="evict", job="evict-me-*", after_s=0.5)
    result = lcli("run", str(evicting_job(write, emulator, retries=0)), "--json")
    job = result.json()
    assert result.rc == 1 and job["state"] == "PREEMPTED"
    assert "dedicated_node_group" in job["detail"]


def test_the_dry_run_is_the_job_body_that_is_sent(lcli, write, home, emulator):
    from helpers import assert_dry_run_is_the_plan_sent

    path = write(
        "name: same\nimage: python:3.11\ncommand: sleep 300\nlauncher: none\nnodes: 2\n"
        "env: {HF_TOKEN: '${HF_TOKEN}'}\nlepton:\n  resource_shape: cpu.small\n"
    )
    job_id = assert_dry_run_is_the_plan_sent(lcli, home, path, env={"HF_TOKEN": "hf_x"})
    assert lcli("cancel", job_id, "--json").json()["state"] == "CANCELLED"


def test_cancel_stops_every_replica(lcli, write, emulator):
    path = write(
        "name: long\nimage: python:3.11\ncommand: sleep 300\nlauncher: none\nnodes: 2\n"
        "lepton:\n  resource_shape: cpu.small\n"
    )
    job = lcli("run", str(path), "--detach", "--json").json()
    run = wait_until(lambda: next(iter(emulator.world.jobs.values()), None), what="job")
    wait_until(lambda: run.state == "Running", what="running")
    procs = [r.proc for r in run.replicas]
    result = lcli("cancel", job["id"], "--json")
    assert result.json()["state"] == "CANCELLED"
    assert all(p is not None and p.poll() is not None for p in procs)
    status = LeptonSDK().get_job_status(job["id"])
    assert status["status"] == "Cancelled" and status["state"] == "Stopped"  # never Error


def test_two_processes_polling_one_evicted_job_resubmit_it_once(lcli, write, emulator):
    """Both read the job before either polled it (two `ps` at once): the first one's
    claim of attempt 2 is stored, the second one's finds the native id moved on and
    creates nothing."""
    from anylaunch.store import Store

    emulator.add_fault(kind="evict", job="evict-me-*", after_s=0.5, count=1)
    job = lcli("run", str(evicting_job(write, emulator)), "--detach", "--json").json()
    first = wait_until(lambda: next(iter(emulator.world.jobs.values()), None), what="job")
    wait_until(lambda: first.state == "Failed", what="the eviction")
    one, two = Store(), Store()
    seen_by_one, seen_by_two = one.list(limit=None), two.list(limit=None)
    watch.refresh(seen_by_one, one)
    watch.refresh(seen_by_two, two)
    assert len(emulator.world.jobs) == 2  # attempt 1 and one attempt 2
    assert seen_by_one[0].native_id == seen_by_two[0].native_id  # both see the same job
    events = one.events(job["id"])
    assert len([e for e in events if (e["detail"] or "").startswith("attempt 2")]) == 1
    one.close()
    two.close()
    lcli("cancel", job["id"])
