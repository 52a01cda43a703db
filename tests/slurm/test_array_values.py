"""A run that lists one value per split renders SPLIT_VALUE per array task (no cluster)."""

from __future__ import annotations

import shlex

from anylaunch.backends.slurm.backend import SlurmBackend
from anylaunch.jobfile import loader
from anylaunch.store import Store


def test_array_tasks_get_their_split_values(write, home):
    path = write('command: [python, t.py]\nsplits: [lr-0.1, "it\'s 2"]\nslurm: {nodes: 1}\n')
    spec = loader.load(path, environ={})
    backend = SlurmBackend()
    store = Store(home)
    contexts = [
        (i, backend.prepare(spec, f"job0000{i}", str(home / f"j{i}"), store, reserve=False))
        for i in (0, 1)
    ]
    script = backend.plan_array(spec, contexts).files["sbatch.sh"]
    assert f"SPLIT_VALUE={shlex.quote('lr-0.1')}" in script
    quoted = shlex.quote("it's 2")
    assert f"SPLIT_VALUE={quoted}" in script
    assert "export SPLIT_VALUE" in script
