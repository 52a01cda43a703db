"""GPUs on the devstack Slurm cluster, whose nodes have GRES gpu (stand-in device files):
a `gpus_per_node` job is scheduled onto GPUs of its own on every node, ranks without GPUs
get none, and a request no node can meet is refused before anything waits for it."""

from __future__ import annotations

import re

import pytest

from anylaunch.state import State
from helpers import wait_until

# Each node says what Slurm gave it, then waits (up to a minute) until every node of both
# jobs in the binding test has spoken: the two jobs hold their GPUs at the same time.
SHOW = (
    "command: 'echo \"node $NODE_RANK on $SLURMD_NODENAME: [${CUDA_VISIBLE_DEVICES-unset}]"
    ' gpus_on_node=${SLURM_GPUS_ON_NODE-unset}"; touch BARRIER/$ANYLAUNCH_JOB_ID-$NODE_RANK;'
    " for i in $(seq 600); do [ $(ls BARRIER | wc -l) -ge WAIT ] && exit 0; sleep 0.1; done;"
    " exit 1'\nlauncher: none\nslurm: {time: '00:15:00'}\n"
)


@pytest.fixture
def gpus_on_a_node(devstack) -> int:
    assert "DEVSTACK_SLURM_GPUS" in devstack, "the devstack has no GPUs yet: scripts/devstack up"
    return int(devstack["DEVSTACK_SLURM_GPUS"])


def job_file(write, tmp_path, size: str, name: str = "job.yaml", wait: int = 0):
    barrier = tmp_path / "barrier"
    barrier.mkdir(exist_ok=True)
    text = SHOW.replace("BARRIER", str(barrier)).replace("WAIT", str(wait)) + size
    return write(text, name)


def seen(cli_inproc, job_id: str) -> dict[tuple[str, str], tuple[str, str]]:
    """(node rank, node) -> (CUDA_VISIBLE_DEVICES, SLURM_GPUS_ON_NODE) from the job's log."""
    logs = cli_inproc("logs", job_id).out
    found = re.findall(r"node (\d) on (n\d): \[([^\]]*)\] gpus_on_node=(\S+)", logs)
    return {(rank, node): (devices, count) for rank, node, devices, count in found}


def test_two_gpu_jobs_at_once_get_two_gpus_of_their_own_on_each_node(
    cli_inproc, write, tmp_path, leave_no_job_behind, gpus_on_a_node
):
    assert gpus_on_a_node >= 4, "the binding check needs two jobs of 2 GPUs on one node"
    size = "nodes: 2\ngpus_per_node: 2\n"
    first = job_file(write, tmp_path, size, "first.yaml", wait=4)
    second = job_file(write, tmp_path, size, "second.yaml", wait=4)
    started = cli_inproc("run", str(first), "--detach", "--json")
    assert started.rc == 0, started.err
    ended = cli_inproc("run", str(second), "--json", timeout=180)
    assert ended.rc == 0 and ended.json()["state"] == "SUCCEEDED", ended.err
    first_id = started.json()["id"]
    wait_until(
        lambda: cli_inproc("status", first_id, "--json").json()["state"] == State.SUCCEEDED.value,
        120,
        "the first job to end",
        interval=1,
    )
    jobs = [seen(cli_inproc, first_id), seen(cli_inproc, ended.json()["id"])]
    for job in jobs:
        assert sorted(job) == [("0", "n1"), ("1", "n2")], job
        for devices, count in job.values():
            assert len(devices.split(",")) == 2 and count == "2", job
    for place in jobs[0]:  # on each node the two jobs hold different GPUs
        assert not set(jobs[0][place][0].split(",")) & set(jobs[1][place][0].split(",")), jobs


def test_ranks_without_gpus_get_none_though_the_submitter_names_some(
    cli_inproc, write, tmp_path, leave_no_job_behind, gpus_on_a_node
):
    path = job_file(write, tmp_path, "nodes: 2\nranks_per_node: 2\n")
    result = cli_inproc("run", str(path), "--json", env={"CUDA_VISIBLE_DEVICES": "0,1"})
    assert result.rc == 0, result.err
    assert set(seen(cli_inproc, result.json()["id"]).values()) == {("unset", "unset")}


def test_more_gpus_than_a_node_has_is_refused_with_one_line(
    cli_inproc, write, tmp_path, leave_no_job_behind, gpus_on_a_node
):
    path = job_file(write, tmp_path, "gpus_per_node: 16\n")
    result = cli_inproc("run", str(path))
    assert result.rc == 2 and len(result.err.strip().splitlines()) == 1, result.err
    assert (
        f"gpus: no node of partition debug has 16 GPUs (the most is {gpus_on_a_node}):"
        " the job could never start" in result.err
    )
    # Unchecked, sbatch refuses it itself; its own words are the one line.
    section = (
        job_file(write, tmp_path, "", "section.yaml")
        .read_text()
        .replace("slurm: {time: '00:15:00'}", "slurm: {gpus_per_node: 16, ntasks_per_node: 1}")
    )
    refused = cli_inproc("run", str(write(section, "section.yaml")), "--no-preflight")
    assert refused.rc == 1 and len(refused.err.strip().splitlines()) == 1, refused.err
    assert "Requested node configuration is not available" in refused.err


def test_preflight_reads_the_partitions_gpus(
    cli_inproc, write, tmp_path, slurm_conf, gpus_on_a_node
):
    path = job_file(write, tmp_path, "nodes: 2\ngpus_per_node: 2\n")
    checks = cli_inproc("preflight", str(path), "--json").json()["checks"]
    [gpus] = [c for c in checks if c["name"] == "gpus"]
    assert gpus["status"] == "ok" and gpus["message"] == (
        "partition debug: 2 of 2 nodes have 2 GPUs"
    ), gpus
