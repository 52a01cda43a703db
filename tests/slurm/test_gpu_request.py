"""GPUs on Slurm, without a cluster: what the sbatch script asks for, the one-line errors
for a request written two ways, and the GPU preflight read from sinfo output recorded on
the devstack (tests/slurm/recorded/gres_*.json, made by record.py there) and from the GRES
strings of Slurm's own documentation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from anylaunch import api
from anylaunch.backends.slurm import gres, preflight
from anylaunch.errors import ConfigError
from anylaunch.jobfile import loader
from anylaunch.store import Store

RECORDED = Path(__file__).parent / "recorded"


def sinfo(case: str) -> list[gres.NodeGroup]:
    record = json.loads((RECORDED / f"{case}.json").read_text())
    assert record["sinfo"]["argv"] == ["sinfo", "--noheader", "-o", gres.SINFO_FORMAT]
    return gres.node_groups(record["sinfo"]["stdout"])


def plan(tmp_path, text: str):
    spec = loader.from_text(text, file=str(tmp_path / "job.yaml"), environ={})
    return api.dry_run(spec, "slurm", store=Store(tmp_path / "home"))


def directives(tmp_path, text: str) -> list[str]:
    script = plan(tmp_path, text).payload["script"]
    return [
        line.removeprefix("#SBATCH ") for line in script.splitlines() if line.startswith("#SBATCH")
    ]


def error(tmp_path, text: str) -> ConfigError:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        api.dry_run(loader.load(path, environ={}), "slurm", store=Store(tmp_path / "home"))
    assert "\n" not in str(caught.value)
    return caught.value


# -- the request ------------------------------------------------------------------------


def test_gpus_per_node_asks_slurm_for_them_with_one_rank_each(tmp_path):
    lines = directives(
        tmp_path, "command: t\nnodes: 2\ngpus_per_node: 8\nslurm: {partition: gpu}\n"
    )
    assert "--gpus-per-node=8" in lines and "--ntasks-per-node=8" in lines
    assert plan(tmp_path, "command: t\ngpus_per_node: 8\nslurm: {}\n").payload["gpus_per_node"] == 8


def test_gpus_per_node_is_asked_for_without_a_slurm_section_too(tmp_path):
    assert "--gpus-per-node=4" in directives(tmp_path, "command: t\ngpus_per_node: 4\n")


def test_ranks_without_gpus_ask_for_none(tmp_path):
    lines = directives(tmp_path, "command: t\nnodes: 2\nranks_per_node: 3\nslurm: {}\n")
    assert "--ntasks-per-node=3" in lines
    assert not [line for line in lines if line.startswith(("--gpus", "--gres"))]


def test_a_typed_gres_is_the_request_and_sets_the_ranks(tmp_path):
    lines = directives(tmp_path, 'command: t\ngpus_per_node: 8\nslurm: {gres: "gpu:h100:8"}\n')
    assert "--gres=gpu:h100:8" in lines and "--ntasks-per-node=8" in lines
    assert not [line for line in lines if line.startswith("--gpus-per-node")]


def test_automodel_gpus_per_node_in_the_section_asks_for_them(tmp_path):
    # AutoModel's launcher: --gpus-per-node and torchrun with that many ranks per node.
    text = (
        "recipe: TrainFinetuneRecipeForNextTokenPrediction\ncommand: t\nslurm: {gpus_per_node: 8}\n"
    )
    lines = directives(tmp_path, text)
    assert "--gpus-per-node=8" in lines and "--ntasks-per-node=8" in lines


@pytest.mark.parametrize(
    ("text", "line", "key", "words"),
    [
        ("command: t\ngpus_per_node: 0\n", 2, "gpus_per_node", "ranks_per_node: N"),
        ("command: t\ngpus_per_node: 2\nranks_per_node: 2\n", 3, "ranks_per_node", "one rank per GPU"),
        ("command: t\nranks_per_node: 2\nslurm:\n  gpus_per_node: 2\n", 2, "ranks_per_node",
         "slurm.gpus_per_node (job.yaml:4) asks for GPUs"),
        ("command: t\nranks_per_node: 2\nslurm:\n  gres: gpu:2\n", 2, "ranks_per_node",
         "slurm.gres (job.yaml:4) asks for GPUs"),
        ("command: t\ngpus_per_node: 8\nslurm:\n  gpus_per_node: 4\n", 4, "slurm.gpus_per_node",
         "4 disagrees with gpus_per_node: 8 (job.yaml:2)"),
        ("command: t\ngpus_per_node: 8\nslurm:\n  gres: gpu:h100:4\n", 4, "slurm.gres",
         "4 disagrees with gpus_per_node: 8"),
        ("command: t\nslurm:\n  gpus_per_node: 8\n  gres: gpu:8\n", 2, "slurm", "write the GPUs in one"),
    ],
)  # fmt: skip
def test_a_wrong_combination_is_one_line_naming_file_line_and_key(tmp_path, text, line, key, words):
    err = error(tmp_path, text)
    assert (err.line, err.key) == (line, key) and err.file.endswith("job.yaml")
    assert words in str(err).replace(f"{tmp_path}/", "")


# -- GRES strings -----------------------------------------------------------------------


def test_gres_strings_as_slurm_documents_them():
    # gres.conf(5) and the GRES guide's examples, scontrol(1)'s socket-bound form.
    mixed = gres.parse("gpu:tesla:2,gpu:kepler:2,mps:400,bandwidth:lustre:no_consume:4G")
    assert gres.gpus(mixed) == 4 and gres.gpus(mixed, "kepler") == 2
    assert gres.Gres("bandwidth", "lustre", 4 << 30) in mixed
    assert gres.gpus(gres.parse("gpu:4(S:0-1)")) == 4
    assert gres.gpus(gres.parse("gpu:a30:4(S:4-5,10-11),gpu:a30:2(S:0)")) == 6  # comma inside ( )
    assert gres.gpus(gres.parse("gpu:2,shard:64")) == 2
    assert gres.parse("(null)") == [] and gres.gpus(gres.parse("mps:200")) == 0
    assert gres.requested("gpu") == (1, None) and gres.requested("gpu:h100:8,nvme:1") == (8, "h100")
    assert gres.requested("nvme:1") is None and gres.requested(None) is None


# -- the preflight, on recorded sinfo output --------------------------------------------


def judged(case: str, want: int, nodes: int, partition: str | None = None, kind=None):
    groups = sinfo(case)
    return preflight.judge(
        gres.capacity(groups, partition, want, kind), partition, want, kind, nodes
    )


def test_a_request_the_partition_can_meet_is_ok():
    [check] = judged("gres_idle", want=2, nodes=2)
    assert (check.name, check.status) == (
        "gpus",
        "ok",
    ) and "2 of 2 nodes have 2 GPUs" in check.message
    assert judged("gres_busy", want=4, nodes=2)[0].status == "ok"  # busy nodes free up


def test_more_gpus_than_any_node_has_fails_with_what_there_is():
    [check] = judged("gres_idle", want=16, nodes=1)
    assert check.status == "fail"
    assert check.message == (
        "no node of partition debug has 16 GPUs (the most is 4): the job could never start"
    )
    assert "at most 4 GPUs per node" in check.fix


def test_more_nodes_with_those_gpus_than_the_partition_has_fails():
    [check] = judged("gres_idle", want=4, nodes=3)
    assert (
        check.status == "fail" and "only 2 of partition debug's nodes have 4 GPUs" in check.message
    )


def test_drained_nodes_make_it_a_warning_not_a_failure():
    [check] = judged("gres_drained", want=2, nodes=2)
    assert check.status == "warn" and "only 1 of the 2 nodes with 2 GPUs take jobs" in check.message
    assert judged("gres_drained", want=2, nodes=1)[0].status == "ok"


def test_a_partition_without_gpus_and_an_unknown_one():
    groups = gres.node_groups("cpu*|12|idle|(null)\ngpu|2|idle|gpu:a100:4(S:0-1)\n")
    [none] = preflight.judge(gres.capacity(groups, None, 1), None, 1, None, 1)
    assert none.status == "fail" and "partition cpu has no GPUs" in none.message
    assert "ranks_per_node" in none.fix
    [typed] = preflight.judge(gres.capacity(groups, "gpu", 4, "h100"), "gpu", 4, "h100", 1)
    assert typed.status == "fail" and "no h100 GPUs" in typed.message
    [unknown] = preflight.judge(gres.capacity(groups, "big", 1), "big", 1, None, 1)
    assert unknown.status == "warn" and "no partition big" in unknown.message
