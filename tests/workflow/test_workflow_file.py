"""Workflow files: steps inheriting the top-level keys, needs, `${steps...}` handoffs,
and the one-line errors (file, line, key, fix; exit 2) for a graph that cannot run."""

from __future__ import annotations

import pytest

from anylaunch import workflow
from anylaunch.errors import ConfigError

FOUR_STEPS = """
name: demo
image: python:3.11
env: {SHARED: "1"}
slurm: {partition: debug, cache_root: /shared/cache}
steps:
  prepare:
    backend: local
    command: [bash, -c, "echo prep"]
    outputs: {data: s3://bucket/wf/data/}
  train:
    backend: slurm
    nodes: 2
    command: [bash, -c, "echo train"]
    inputs: {data: "${steps.prepare.outputs.data}"}
    outputs: {ckpt: s3://bucket/wf/ckpt/}
  eval:
    lepton: {gpu_count: 1, resource_shape: gpu.1xh100}
    splits: 4
    env: {OWN: "2"}
    command: [bash, -c, "echo eval $SPLIT_ID"]
    inputs: {ckpt: "${steps.train.outputs.ckpt}"}
  again:
    backend: slurm
    needs: [train]
    command: [bash, -c, "echo again"]
    inputs: {ckpt: "${steps.train.outputs.ckpt}"}
  export:
    needs: [eval, again]
    backend: local
    command: [bash, -c, "echo export"]
"""


def test_steps_inherit_top_level_keys_and_run_in_dependency_order(write):
    wf = workflow.load(str(write(FOUR_STEPS, "wf.yaml")))
    assert wf.levels() == [["prepare"], ["train"], ["eval", "again"], ["export"]]
    train, evaluate = wf.steps["train"], wf.steps["eval"]
    assert (train.backend, train.spec.nodes, train.spec.name) == ("slurm", 2, "demo-train")
    assert train.spec.lepton is None and train.spec.slurm.partition == "debug"
    assert evaluate.backend == "lepton" and evaluate.splits == 4
    assert evaluate.spec.env["SHARED"] == "1" and evaluate.spec.env["OWN"] == "2"
    assert evaluate.spec.image == "python:3.11" and evaluate.spec.slurm is None
    # A reference is the producer's output URI, and makes the step need the producer.
    assert evaluate.spec.inputs["ckpt"].uri == "s3://bucket/wf/ckpt/"
    assert evaluate.needs == ["train"]


def test_handoff_is_shared_only_where_both_steps_see_the_same_filesystem(write):
    wf = workflow.load(str(write(FOUR_STEPS, "wf.yaml")))
    [to_lepton] = wf.steps["eval"].handoffs
    [to_slurm] = wf.steps["again"].handoffs
    [to_train] = wf.steps["train"].handoffs
    assert (to_lepton.via, to_lepton.filesystem) == ("s3", None)
    assert (to_slurm.via, to_slurm.filesystem) == ("shared", "slurm /shared/cache")
    assert to_train.via == "s3"  # local's cache is not the cluster's


def test_only_and_from_select_part_of_the_graph(write):
    wf = workflow.load(str(write(FOUR_STEPS, "wf.yaml")))
    assert wf.select(start="eval") == ["eval", "export"]
    assert wf.select(only="again") == ["again"]
    assert wf.select() == ["prepare", "train", "eval", "again", "export"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "steps:\n  a:\n    command: [x]\n    needs: [b]\n  b:\n    command: [x]\n    needs: [a]\n",
            "wf.yaml:7: steps.b.needs[0]: steps form a cycle: a → b → a — remove one",
        ),
        (
            "steps:\n  a:\n    command: [x]\n    needs: [trian]\n  train:\n    command: [x]\n",
            "wf.yaml:4: steps.a.needs[0]: no step 'trian' — did you mean 'train'?",
        ),
        (
            "steps:\n  a:\n    command: [x]\n    inputs: {c: '${steps.nope.outputs.c}'}\n",
            "wf.yaml:4: steps.a.inputs.c: no step 'nope'",
        ),
        (
            "steps:\n  a:\n    command: [x]\n  b:\n    command: [x]\n"
            "    inputs: {c: '${steps.a.outputs.ckpt}'}\n",
            "wf.yaml:6: steps.b.inputs.c: step 'a' has no output 'ckpt' — add outputs:",
        ),
        (
            "command: [x]\nsteps:\n  a:\n    nodes: many\n",
            "wf.yaml:4: steps.a.nodes:",
        ),
        (
            "steps:\n  a:\n    command: [x]\n    needs: [a]\n",
            "wf.yaml:4: steps.a.needs[0]: a step cannot need itself",
        ),
    ],
)
def test_a_graph_that_cannot_run_is_one_line_naming_file_line_and_key(write, text, message):
    path = write(text, "wf.yaml")
    with pytest.raises(ConfigError) as caught:
        workflow.load(str(path))
    assert caught.value.message.startswith(f"{path.parent}/{message}"), caught.value.message
    assert "\n" not in caught.value.message


def test_cli_reports_a_cycle_with_exit_2_and_no_traceback(cli_inproc, write):
    path = write(
        "steps:\n  a:\n    command: [x]\n    needs: [c]\n  b:\n    needs: [a]\n"
        "    command: [x]\n  c:\n    needs: [b]\n    command: [x]\n",
        "wf.yaml",
    )
    result = cli_inproc("run", str(path), "--dry-run")
    assert result.rc == 2
    assert result.err.strip().splitlines() == [
        f"anylaunch: error: {path}:6: steps.b.needs[0]: steps form a cycle: a → c → b → a"
        " — remove one of these needs (a step can only use what runs before it)"
    ]


def test_dry_run_prints_every_step_plan_and_the_order(cli_inproc, write):
    path = write(
        """
        name: tiny
        launcher: none
        steps:
          one:
            command: [bash, -c, "echo one"]
            outputs: {o: s3://bucket1/o/}
          two:
            splits: 2
            command: [bash, -c, "echo two $SPLIT_ID"]
            inputs: {i: "${steps.one.outputs.o}"}
          three:
            needs: [one]
            command: [bash, -c, "echo three"]
        """,
        "wf.yaml",
    )
    text = cli_inproc("run", str(path), "--dry-run")
    assert text.rc == 0, text.err
    assert "  1. one\n  2. two [2 splits] | three\n" in text.out
    assert "input i <- one.outputs.o (s3://bucket1/o/) via shared filesystem local" in text.out
    assert "echo two" in text.out and "echo three" in text.out
    data = cli_inproc("run", str(path), "--dry-run", "--json", "--from", "two").json()
    assert data["kind"] == "workflow" and data["order"] == ["two"]
    assert [s["runs"] for s in data["steps"]] == [False, True, False]
    assert data["steps"][1]["plan"]["backend"] == "local"
    assert cli_inproc("ps", "--json").json() == []  # a dry run records nothing
    unknown = cli_inproc("run", str(path), "--only", "nope", "--json")
    assert unknown.rc == 2 and unknown.json()["error"]["code"] == "USAGE"
