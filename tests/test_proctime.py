"""The start time `run` records without psutil is the one psutil reads back later (a
mismatch would make a live submitter or supervisor look like a reused pid)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import psutil
import pytest

from anylaunch.store.proctime import create_time, running
from helpers import wait_until


def test_start_times_agree_with_psutil_for_this_process_and_a_child_with_an_odd_name(tmp_path):
    assert abs(create_time() - psutil.Process().create_time()) < 0.01
    # A command name with a space and a parenthesis: /proc/PID/stat shows it in parentheses.
    odd = tmp_path / "odd ) name"
    os.symlink(shutil.which("sleep") or "/bin/sleep", odd)
    child = subprocess.Popen([str(odd), "30"])
    try:
        assert psutil.Process(child.pid).name() == "odd ) name"
        assert abs(create_time(child.pid) - psutil.Process(child.pid).create_time()) < 0.01
    finally:
        child.kill()
        child.wait()


def test_a_process_that_ended_is_reported_as_psutil_reports_it(spawns):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with pytest.raises(psutil.NoSuchProcess):
        create_time(gone.pid)


def test_a_process_runs_only_while_alive_unreaped_and_under_its_own_start_time():
    child = subprocess.Popen(["sleep", "30"])
    started = psutil.Process(child.pid).create_time()
    assert running(child.pid, started) and running(child.pid, None)
    assert not running(child.pid, started - 5)  # an earlier process that had this pid
    child.kill()
    # Ended, not yet reaped: a zombie, which no longer runs.
    wait_until(lambda: psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE, 30, "zombie")
    assert not running(child.pid, started)
    child.wait()
    assert not running(child.pid, started)
