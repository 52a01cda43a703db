"""The splits of a run are checked against the task the library accepted, not one by one.

The shortcut must never let through a task the library would refuse: every split it
covers is also handed to the real library here, and a split whose difference the
library would refuse goes to the full validation and is refused.
"""

from __future__ import annotations

import copy
import random

import pytest

from anylaunch.backends.base import PlanContext
from anylaunch.backends.skypilot import task as sky_task
from anylaunch.backends.skypilot import validate
from anylaunch.backends.skypilot.backend import SkyPilotBackend
from anylaunch.errors import ConfigError
from anylaunch.jobfile import loader
from anylaunch.launch import splits
from anylaunch.store import new_id
from conftest import needs_sky

pytestmark = needs_sky

RUN = """\
name: sweep
command: python train.py --lr $SPLIT_VALUE
nodes: 2
gpus_per_node: 8
splits: ["0.1", "0.01", "a value with spaces", "x: y # not a comment", "", "'quoted'"]
skypilot:
  cloud: aws
  accelerators: "H100:8"
  use_spot: true
checkpoint: {dir: /checkpoints}
"""


def _tasks(spec, count):
    """(job id, rendered task) of each split, as `splits.launch` renders them."""
    out = []
    for i in range(count):
        job_id = new_id()
        ctx = PlanContext(job_id=job_id, job_dir=f"/tmp/{job_id}", values={"workdir": None})
        out.append((job_id, sky_task.render(splits.with_split(spec, i), ctx).payload["task"]))
    return out


def test_every_split_the_shortcut_covers_is_one_the_library_accepts(sky_home, write):
    spec = loader.load(write(RUN, "sweep.yaml"))
    rendered = _tasks(spec, len(spec.split_values()))
    first_id, first = rendered[0]
    validate.validate(first, source=spec.source)
    accepted = validate.Accepted(first, first_id)
    for job_id, task in random.Random(7).sample(rendered[1:], k=len(rendered) - 1):
        assert accepted.covers(task, job_id)  # differs by job id and split env only
        validate.validate(task, source=spec.source)  # and the library agrees


def test_a_plan_of_many_splits_hands_only_the_first_to_the_library(sky_home, write, monkeypatch):
    spec = loader.load(write(RUN, "sweep.yaml"))
    backend = SkyPilotBackend()
    calls = []
    real = validate.validate

    def counted(task, *, source):  # the real validation, counted
        calls.append(task)
        return real(task, source=source)

    monkeypatch.setattr(validate, "validate", counted)
    for i in range(len(spec.split_values())):
        job_id = new_id()
        ctx = PlanContext(job_id=job_id, job_dir=f"/tmp/{job_id}", values={"workdir": None})
        backend.plan(splits.with_split(spec, i), ctx)
    assert len(calls) == 1


@pytest.mark.parametrize(
    ("change", "rejected_key"),
    [
        # A value the library refuses in a field splits never change.
        (lambda t: t["resources"].update(use_spot="sometimes"), "use_spot"),
        # An env name the library's schema refuses.
        (lambda t: t["envs"].update({"1BAD": "x"}), "envs"),
    ],
)
def test_a_split_that_differs_where_the_shortcut_cannot_vouch_is_refused_by_the_library(
    sky_home, write, change, rejected_key
):
    spec = loader.load(write(RUN, "sweep.yaml"))
    (first_id, first), (job_id, task) = _tasks(spec, 2)
    validate.validate(first, source=spec.source)
    accepted = validate.Accepted(first, first_id)
    bad = copy.deepcopy(task)
    change(bad)
    assert not accepted.covers(bad, job_id)
    with pytest.raises(ConfigError, match="SkyPilot rejects the task"):
        validate.validate(bad, source=spec.source)


def test_an_env_value_the_library_writes_into_a_file_mount_is_validated_in_full(sky_home, write):
    text = RUN.replace(
        "  use_spot: true\n",
        "  use_spot: true\n  file_mounts: {/data: 's3://bucket/$${SPLIT_ID}'}\n",
    )
    spec = loader.load(write(text, "sweep.yaml"))
    (first_id, first), (job_id, task) = _tasks(spec, 2)
    validate.validate(first, source=spec.source)
    accepted = validate.Accepted(first, first_id)
    assert not accepted.covers(task, job_id)


def test_a_split_value_that_names_a_variable_is_validated_in_full(sky_home, write):
    # `$HOME` is exported by the run script, not given to SkyPilot as `envs`: another shape.
    spec = loader.load(write(RUN.replace('"0.01"', '"$$HOME"'), "sweep.yaml"))
    (first_id, first), (job_id, task) = _tasks(spec, 2)
    validate.validate(first, source=spec.source)
    assert not validate.Accepted(first, first_id).covers(task, job_id)
    validate.validate(task, source=spec.source)


def test_a_different_job_is_validated_in_full(sky_home, write):
    spec = loader.load(write(RUN, "sweep.yaml"))
    other = loader.load(write(RUN.replace("H100:8", "A100:8"), "other.yaml"))
    (first_id, first), _ = _tasks(spec, 2)
    (job_id, task), _ = _tasks(other, 2)
    validate.validate(first, source=spec.source)
    assert not validate.Accepted(first, first_id).covers(task, job_id)
