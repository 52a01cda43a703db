"""Splits on a backend without arrays (local): one job per split, each with SPLIT_ID."""

from __future__ import annotations

import pytest

from anylaunch.errors import UsageError
from anylaunch.jobfile import loader
from anylaunch.launch import splits
from anylaunch.launch.resolve import resolve
from anylaunch.state import State
from anylaunch.store import Store


def test_each_split_is_a_job_of_the_run_with_its_split_id(write, home):
    path = write("command: bash -c 'echo split=$SPLIT_ID; exit $SPLIT_ID'\nlauncher: none\n")
    store = Store(home)
    run = splits.launch(resolve(loader.load(path, environ={})), [0, 2], store=store)
    finals = {job.record.split_id: job.wait(timeout=60) for job in run.jobs}
    assert finals == {0: State.SUCCEEDED, 2: State.FAILED}
    assert run.states() == finals
    records = store.list(run_id=run.id)
    assert sorted((r.split_id, r.exit_code) for r in records) == [(0, 0), (2, 2)]
    assert "split=2" in run.jobs[1].logs()


@pytest.mark.parametrize("bad", [0, [], [1, 1], [-1]])
def test_split_counts_and_ids_are_checked(write, home, bad):
    path = write("command: 'true'\n")
    with pytest.raises(UsageError):
        splits.launch(resolve(loader.load(path, environ={})), bad, store=Store(home))
