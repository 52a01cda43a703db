"""Fixtures for the tests that submit workflows to the devstack Slurm cluster."""

from __future__ import annotations

import pytest

from anylaunch.backends.slurm import commands
from anylaunch.store import Store


@pytest.fixture
def slurm_conf(devstack, monkeypatch):
    """The devstack cluster's slurm.conf, for the Slurm commands a test runs itself."""
    monkeypatch.setenv("SLURM_CONF", devstack["SLURM_CONF"])
    return devstack["SLURM_CONF"]


@pytest.fixture
def leave_no_job_behind(slurm_conf, home):
    """A test that fails midway must not leave a step waiting for its go file (or
    sleeping) on the shared cluster: every job it recorded is cancelled at the end."""
    yield
    ids = [j.native_id for j in Store(home).list(limit=None) if j.native_id]
    if ids:
        commands.run(["scancel", *ids], check=False)


LAST = "test_time_limit_kill_ends_timeout_after_an_early_signal"


def pytest_collection_modifyitems(items):
    """The time-limit test waits for a job that test_cluster.py submits as it starts and
    that needs over two minutes of wall time: it runs last in the session, so that the rest
    of the suite runs meanwhile instead of waiting with it."""
    last = [item for item in items if item.name == LAST]
    items[:] = [item for item in items if item.name != LAST] + last
