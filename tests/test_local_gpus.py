"""GPUs on this machine: each simulated node of a `gpus_per_node` job gets GPUs of its own
(CUDA_VISIBLE_DEVICES), ranks without GPUs see none, and a job asking for more GPUs than
the machine shows fails its preflight with the fix. The machine's GPUs are what
CUDA_VISIBLE_DEVICES names here, so the tests mean the same on a GPU machine."""

from __future__ import annotations

import re

SHOW = "command: 'echo \"node $NODE_RANK sees [${CUDA_VISIBLE_DEVICES-unset}]\"'\nlauncher: none\n"


def test_each_node_gets_its_own_share_of_the_gpus(cli, write):
    path = write(SHOW + "nodes: 2\ngpus_per_node: 2\n")
    result = cli("run", str(path), "--json", env={"CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    assert result.rc == 0, result.err
    logs = cli("logs", result.json()["id"]).out
    assert sorted(re.findall(r"node (\d) sees \[(.*)\]", logs)) == [("0", "0,1"), ("1", "2,3")]


def test_ranks_without_gpus_see_none_and_a_job_that_says_neither_sees_the_machines(cli, write):
    cpu = cli("run", str(write(SHOW + "ranks_per_node: 2\n")), "--json",
              env={"CUDA_VISIBLE_DEVICES": "0,1"})  # fmt: skip
    assert "node 0 sees []" in cli("logs", cpu.json()["id"]).out
    plain = cli(
        "run", str(write(SHOW, "plain.yaml")), "--json", env={"CUDA_VISIBLE_DEVICES": "0,1"}
    )
    assert "node 0 sees [0,1]" in cli("logs", plain.json()["id"]).out


def test_more_gpus_than_the_machine_shows_fails_preflight_with_the_cpu_key(cli_inproc, write):
    path = write(SHOW + "nodes: 2\ngpus_per_node: 2\n")
    result = cli_inproc("run", str(path), env={"CUDA_VISIBLE_DEVICES": "0,1"})
    assert result.rc == 2 and len(result.err.strip().splitlines()) == 1, result.err
    assert (
        "gpus_per_node: 2 on each of 2 nodes needs 4 GPUs; this machine shows 2 (0,1)" in result.err
    )
    assert "write ranks_per_node: 2 instead of gpus_per_node" in result.err
    none = cli_inproc("preflight", str(path), "--json", env={"CUDA_VISIBLE_DEVICES": ""})
    [gpus] = [c for c in none.json()["checks"] if c["name"] == "gpus"]
    assert gpus["status"] == "fail" and "this machine shows none" in gpus["message"]


def test_the_dry_run_shows_each_nodes_gpus(cli_inproc, write):
    path = write(SHOW + "nodes: 2\ngpus_per_node: 1\n")
    result = cli_inproc("run", str(path), "--dry-run", env={"CUDA_VISIBLE_DEVICES": "GPU-a,GPU-b"})
    assert result.rc == 0, result.err
    assert re.findall(r"CUDA_VISIBLE_DEVICES=(\S+)", result.out) == ["GPU-a", "GPU-b"]
