"""GPUs on Lepton: `gpus_per_node` picks the shape with that `gpu_count` from the
workspace's catalog (the emulator's, the shapes the real API lists), one rank per GPU;
`ranks_per_node` runs on a CPU shape; a count no shape offers is one line naming them."""

from __future__ import annotations

import re

import pytest


def body(lcli, path) -> dict:
    result = lcli("run", str(path), "--dry-run", "--json")
    assert result.rc == 0, result.err
    return result.json()["plan"]["payload"]


def shapes(lcli) -> dict[str, dict]:
    """The workspace's shapes as `anylaunch lepton shapes` lists them."""
    result = lcli("lepton", "shapes", "--json")
    assert result.rc == 0, result.err
    return result.json()


@pytest.mark.parametrize("gpus", [1, 2, 8])
def test_gpus_per_node_picks_the_shape_with_that_gpu_count(lcli, write, gpus):
    path = write(
        f"image: pytorch/pytorch:2.5.1\ncommand: python t.py\nnodes: 2\ngpus_per_node: {gpus}\nlepton: {{}}\n"
    )
    spec = body(lcli, path)["spec"]
    assert shapes(lcli)[spec["resource_shape"]]["gpu_count"] == gpus
    assert f"--nproc-per-node {gpus}" in spec["container"]["command"][-1]
    assert {"name": "NUM_GPU_PER_NODE", "value": str(gpus)} in spec["envs"]


def test_ranks_without_gpus_run_on_the_smallest_cpu_shape(lcli, write):
    path = write(
        "image: pytorch/pytorch:2.5.1\ncommand: python t.py\nranks_per_node: 3\nlepton: {}\n"
    )
    spec = body(lcli, path)["spec"]
    assert spec["resource_shape"] == "cpu.small"
    assert shapes(lcli)["cpu.small"]["gpu_count"] == 0
    assert "--nproc-per-node 3" in spec["container"]["command"][-1]


@pytest.mark.parametrize(
    ("size", "line", "key"), [("gpus_per_node: 3\nlepton: {}\n", 3, "gpus_per_node"),
                              ("lepton:\n  gpu_count: 3\n", 4, "lepton.gpu_count")]
)  # fmt: skip
def test_a_count_no_shape_offers_is_one_line_naming_the_shapes(lcli, write, size, line, key):
    path = write("image: pytorch/pytorch:2.5.1\ncommand: python t.py\n" + size)
    result = lcli("run", str(path), "--dry-run")
    assert result.rc == 2 and len(result.err.strip().splitlines()) == 1, result.err
    assert f"{path}:{line}: {key}: no shape with 3 GPUs in this workspace" in result.err
    offered = re.search(r"one of: (.*)$", result.err.strip()).group(1)
    listed = sorted(shapes(lcli).items(), key=lambda item: (item[1]["gpu_count"], item[0]))
    assert offered.split(", ") == [
        f"{shape_id} ({shape['gpu_count']} GPUs)" if shape["gpu_count"] else f"{shape_id} (CPU)"
        for shape_id, shape in listed
    ]
