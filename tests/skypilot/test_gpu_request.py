"""GPUs on SkyPilot: `gpus_per_node` is the count in the task's accelerators, one rank per
GPU; `ranks_per_node` asks for none. Every task here is read back by the real SkyPilot
library (`validate`, as `sky launch task.yaml` reads it), offline."""

from __future__ import annotations

import pytest

from anylaunch import api
from anylaunch.backends.skypilot import validate
from anylaunch.errors import ConfigError
from anylaunch.jobfile import loader
from anylaunch.store import Store
from conftest import needs_sky

pytestmark = needs_sky


def task_of(write, tmp_path, text: str) -> dict:
    spec = loader.load(write(text), environ={})
    return api.dry_run(spec, "skypilot", store=Store(tmp_path / "home")).payload["task"]


def accelerators(task: dict) -> list[dict[str, int]]:
    """What SkyPilot itself makes of the task's resources: {type: count} per candidate."""
    return sorted((r.accelerators for r in validate.validate(task, source=None).resources),
                  key=str)  # fmt: skip


def test_gpus_per_node_is_the_accelerator_count_with_one_rank_each(sky_home, write, tmp_path):
    text = "command: python t.py\nnodes: 2\ngpus_per_node: 8\nskypilot:\n  cloud: aws\n  accelerators: H100\n"
    task = task_of(write, tmp_path, text)
    assert task["resources"]["accelerators"] == "H100:8" and task["num_nodes"] == 2
    assert accelerators(task) == [{"H100": 8}]
    assert "--nproc-per-node 8" in task["run"]


def test_every_candidate_gets_the_count(sky_home, write, tmp_path):
    text = (
        "command: python t.py\ngpus_per_node: 4\nskypilot:\n  any_of:\n"
        "    - {cloud: aws, accelerators: H100}\n    - {cloud: gcp, accelerators: 'A100:4'}\n"
    )
    task = task_of(write, tmp_path, text)
    assert [c["accelerators"] for c in task["resources"]["any_of"]] == ["H100:4", "A100:4"]
    assert accelerators(task) == [{"A100": 4}, {"H100": 4}]


def test_ranks_without_gpus_ask_for_no_accelerator(sky_home, write, tmp_path):
    text = "command: python t.py\nranks_per_node: 3\nskypilot:\n  cloud: kubernetes\n"
    task = task_of(write, tmp_path, text)
    assert "accelerators" not in task["resources"] and "--nproc-per-node 3" in task["run"]
    assert accelerators(task) == [None]


@pytest.mark.parametrize(
    ("text", "line", "key", "words"),
    [
        ("command: t\ngpus_per_node: 8\nskypilot:\n  cloud: aws\n", 2, "gpus_per_node",
         "SkyPilot needs their type"),
        ("command: t\nranks_per_node: 2\nskypilot:\n  accelerators: H100\n", 2, "ranks_per_node",
         "skypilot.accelerators"),
        ("command: t\ngpus_per_node: 8\nskypilot:\n  any_of:\n    - {accelerators: 'A100:4'}\n",
         5, "skypilot.any_of.0.accelerators", "A100:4 disagrees with gpus_per_node: 8"),
        ("command: t\ngpus_per_node: 4\nskypilot:\n  accelerators: 'H100:8'\n", 4,
         "skypilot.accelerators", "8 disagrees with gpus_per_node: 4"),
    ],
)  # fmt: skip
def test_a_wrong_combination_is_one_line_naming_file_line_and_key(
    sky_home, write, tmp_path, text, line, key, words
):
    with pytest.raises(ConfigError) as caught:
        task_of(write, tmp_path, text)
    err = caught.value
    assert (err.line, err.key) == (line, key) and "\n" not in str(err)
    assert words in err.message
