"""A run's splits are rendered from the run's spec once, each split adding only its
environment: what each record stores must be what rendering that split on its own gives."""

from __future__ import annotations

import json

import pytest

from anylaunch.backends.base import get_backend
from anylaunch.jobfile import loader
from anylaunch.launch import pipeline, runkey, splits
from anylaunch.launch.resolve import resolve
from anylaunch.store import Store

JOB = """\
name: sweep
command: python train.py --lr $SPLIT_VALUE
nodes: 2
gpus_per_node: 2
splits: [0.1, 0.2, true]
env: {HF_TOKEN: hf-secret-value, MODE: fast}
local: {master_port: 29500}
slurm: {partition: gpu}
"""


def _alone(spec, split_id: int, attempt: int):
    """One split's spec rendered the long way: its own copy, its attempt and its run key
    (the run's, whatever the job) in its env."""
    one = splits.with_split(spec, split_id)
    env = {**one.env, pipeline.ATTEMPT_ENV: str(attempt)}
    env.update(runkey.tracker_env(runkey.run_key("any-job", "run-1", split_id), env))
    return one.model_copy(update={"env": env})


@pytest.mark.parametrize("recorded", [False, True])
def test_each_local_split_stores_the_spec_and_plan_it_would_have_alone(tmp_path, recorded):
    spec = loader.from_text(JOB, file=str(tmp_path / "job.yaml"))
    store = Store(tmp_path / "home")
    impl = get_backend("local")
    jobs = [(0, "job-a"), (2, "job-c")]
    batch = splits.render(resolve(spec, impl), store, "run-1", jobs, recorded=recorded)
    attempt = 0 if recorded else 1
    for (split_id, job_id), planned in zip(jobs, batch.jobs, strict=True):
        alone = _alone(spec, split_id, attempt)
        assert planned.record.spec == alone.redacted()
        ctx = impl.prepare(alone, job_id, str(store.jobs_dir(job_id)), store, reserve=False)
        assert planned.record.plan == impl.plan(alone, ctx).model_dump(mode="json")
    assert batch.jobs[1].record.spec["env"]["SPLIT_VALUE"] == "true"
    assert batch.jobs[0].record.spec["env"]["HF_TOKEN"] == "***"
    assert "splits" not in batch.jobs[0].record.spec
    store.close()


def test_an_arrays_splits_store_their_own_spec_and_the_one_array_plan(tmp_path):
    spec = loader.from_text(JOB, file=str(tmp_path / "job.yaml"))
    store = Store(tmp_path / "home")
    impl = get_backend("slurm")
    jobs = [(0, "job-a"), (1, "job-b"), (2, "job-c")]
    batch = splits.render(resolve(spec, impl), store, "run-1", jobs)
    assert batch.array
    for (split_id, _), planned in zip(jobs, batch.jobs, strict=True):
        assert planned.record.spec == _alone(spec, split_id, 1).redacted()
    whole = batch.jobs[0].plan.model_dump(mode="json")
    assert batch.jobs[0].record.plan == whole
    script = whole["payload"]["script"]
    assert "ANYLAUNCH_JOB_ID=job-c" in script and "hf-secret-value" not in script
    for later in batch.jobs[1:]:
        kept = later.record.plan
        assert "job-a" in kept["payload"]["script"] and kept["files"] == {}
        for key in ("job_id", "nodes", "secret_env"):
            assert kept[key] == whole[key]
        assert kept["payload"]["requeue"] == whole["payload"]["requeue"]
    store.close()


def test_an_arrays_stored_plans_do_not_grow_with_the_number_of_splits(tmp_path):
    spec = loader.from_text(JOB, file=str(tmp_path / "job.yaml"))
    store = Store(tmp_path / "home")
    impl = get_backend("slurm")

    def stored(count: int) -> int:
        jobs = [(i % 3, f"job-{i:04d}") for i in range(count)]
        records = splits.render(resolve(spec, impl), store, f"run-{count}", jobs).records
        return sum(len(json.dumps(r.plan)) for r in records[1:]) // (count - 1)

    assert stored(300) <= stored(3) + 100  # the job id in the pointer may differ in length
    store.close()
