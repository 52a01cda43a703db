"""The in-process CLI (`cli_inproc`, tests/inproc.py) answers as a separate process would,
and leaves the test process as it found it."""

from __future__ import annotations

import importlib
import os
import signal
import sys

import pytest

import inproc
from helpers import wait_until


def test_the_state_it_resets_is_where_it_says(cli_inproc):
    """Each (module, attribute) the runner empties, restores or watches exists: a module
    moved or renamed must move in tests/inproc.py too, or its state would leak silently."""
    cli_inproc("--help")
    for module, attr in (*inproc.CACHES, *inproc.RESTORED, *inproc.STARTED):
        assert hasattr(importlib.import_module(module), attr), f"{module}.{attr} is gone"


def test_streams_exit_status_and_json_are_a_processes(cli_inproc, write):
    ok = cli_inproc("run", str(write("command: [echo, hi]\n")), "--dry-run")
    assert ok.rc == 0 and "echo hi" in ok.out and ok.err == ""
    usage = cli_inproc("ps", "--no-such-flag")
    assert usage.rc == 2 and usage.out == "" and "No such option" in usage.err
    assert usage.err.startswith("Usage: python -m anylaunch ps")  # as `python -m anylaunch`
    missing = cli_inproc("status", "nosuchjob", "--json")
    assert missing.rc == 2 and missing.err == ""
    assert missing.json()["error"]["code"] == "JOB_NOT_FOUND"


def test_environment_folder_and_process_state_come_back(cli_inproc, write, home, tmp_path):
    before = (
        dict(os.environ),
        os.getcwd(),
        sys.argv,
        sys.path[:],
        sys.stdout,
        signal.getsignal(signal.SIGINT),
    )
    job = write("command: [echo, hi]\nenv:\n  X: ${ONLY_FOR_THE_CALL}\n")
    result = cli_inproc(
        "run", str(job), "--dry-run", "--json", env={"ONLY_FOR_THE_CALL": "yes"}, cwd=tmp_path
    )
    assert result.rc == 0, result.err
    plan = result.json()["plan"]
    assert plan["payload"]["workdir"] == str(tmp_path)  # the call's folder, not pytest's
    assert plan["job_dir"].startswith(str(home))  # ANYLAUNCH_HOME as the fixture set it
    unset = cli_inproc("run", str(job), "--dry-run")  # the variable went with the call
    assert unset.rc == 2 and "ONLY_FOR_THE_CALL is not set" in unset.err
    after = (
        dict(os.environ),
        os.getcwd(),
        sys.argv,
        sys.path[:],
        sys.stdout,
        signal.getsignal(signal.SIGINT),
    )
    assert after == before


def test_a_command_that_starts_a_local_job_is_refused(cli_inproc, write, spawns):
    """It would make the test process the job's parent: the message names `cli`."""
    from anylaunch.backends.local import backend, start

    with pytest.raises(AssertionError, match="use the `cli` fixture"):
        cli_inproc("run", str(write("launcher: none\ncommand: [true]\n")), "--json")
    pids = set(backend._children) | set(start._popens)
    assert pids
    wait_until(lambda: all(start.reap(pid) for pid in pids), 60, "the supervisor to end")
    backend._children.difference_update(pids)
