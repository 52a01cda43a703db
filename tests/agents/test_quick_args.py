"""The CLI's pydantic-free argument checks (`contract.quick`) never pass what the
argument models refuse, and pass the everyday arguments (else they would spare nothing)."""

from __future__ import annotations

import itertools
from typing import get_args

import pytest
from pydantic import ValidationError

from anylaunch.contract import inputs, quick
from anylaunch.state import State

IDS = ["", "a", "abcd1234", "wf-abcd1234", "x" * quick.MAX_ID, "x" * (quick.MAX_ID + 1), None, 7]
LIMITS = [None, -1, 0, 1, 50, 10**9, True, False, 1.0, 1.5, "1"]
STATE_LISTS = [[], ["RUNNING"], ["RUNNING", "FAILED"], ["running"], ["DONE"], [1], [None]]
BACKENDS = [None, "local", "lepton", "toy", "", 5]


def _accepts(model: type, data: dict) -> bool:
    try:
        model.model_validate(data)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize("value", IDS, ids=repr)
def test_a_plain_id_is_one_every_id_model_accepts(value):
    if quick.plain_id(value):
        assert _accepts(inputs.RunOrJobRef, {"id": value})
        assert _accepts(inputs.JobRef, {"job_id": value})


def test_ps_arguments_plainly_valid_are_valid_for_the_model():
    for limit, states, backend in itertools.product(LIMITS, STATE_LISTS, BACKENDS):
        if quick.plain_ps(limit, states, backend):
            data = {"limit": limit, "states": states, "backend": backend}
            assert _accepts(inputs.PsArgs, data), data


def test_dry_run_arguments_plainly_valid_are_valid_for_the_model():
    files = ["train.yaml", "", None, 5]
    overrides = [[], ["nodes=2"], [1], [None]]
    commands = [[], ["python", "train.py"], [3]]
    for file, backend, sets, words in itertools.product(files, BACKENDS, overrides, commands):
        if quick.plain_job_file(file, backend, sets, words):
            data = {"file": file, "backend": backend, "overrides": sets, "command": words}
            assert _accepts(inputs.DryRunArgs, data), data


def test_the_quick_state_names_are_the_models_and_the_stores():
    assert quick.STATES == set(get_args(inputs.StateName)) == {s.value for s in State}


def test_everyday_arguments_take_the_quick_path():
    assert quick.plain_id("abcd1234") and quick.plain_id("wf-abcd1234")
    assert quick.plain_ps(50, [], None) and quick.plain_ps(None, ["RUNNING"], "slurm")
    assert quick.plain_job_file("train.yaml", None, ["nodes=2"], ["python", "train.py"])
    assert not quick.plain_id("") and not quick.plain_ps(0, [], None)
