"""The command as a user starts it, one separate `python -m anylaunch` process per call:
a smoke test for each family of commands. The contract itself is tested in-process
(`cli_inproc`); these keep the entry point, the exit status a shell sees and the two
streams of a real process honest."""

from __future__ import annotations

import pytest

JOB = "name: smoke\nlauncher: none\ncommand: [echo, hello from the job]\n"


@pytest.fixture
def job(cli, write) -> dict:
    """A finished local job, run attached with --json."""
    result = cli("run", str(write(JOB)), "--json")
    assert result.rc == 0, result.err
    return result.json()


def test_run_and_dry_run(cli, write, job):
    assert (job["state"], job["exit_code"]) == ("SUCCEEDED", 0)
    dry = cli("run", str(write(JOB)), "--dry-run")
    assert dry.rc == 0 and "hello from the job" in dry.out and dry.err == "", dry.err


def test_ps_and_status(cli, job):
    assert [j["id"] for j in cli("ps", "--json").json()] == [job["id"]]
    status = cli("status", job["id"])
    assert status.rc == 0 and "SUCCEEDED" in status.out


def test_logs(cli, job):
    logs = cli("logs", job["id"])
    assert logs.rc == 0 and logs.out == "hello from the job\n"


def test_errors_exit_2_with_one_line_on_stderr(cli, write):
    bad = write("command: a\nnodes: many\n")
    result = cli("run", str(bad))
    assert (result.rc, result.out) == (2, "")
    assert (
        result.err.startswith(f"anylaunch: error: {bad}:2: nodes:") and result.err.count("\n") == 1
    )
    assert cli("status", "nosuchjob").rc == 2
    assert cli("ps", "--no-such-flag").rc == 2


def test_json_errors_are_objects_on_stdout(cli):
    result = cli("status", "nosuchjob", "--json")
    assert result.rc == 2 and result.err == ""
    assert result.json()["error"]["code"] == "JOB_NOT_FOUND"
    usage = cli("ps", "--state", "DONE", "--json")
    assert usage.rc == 2 and usage.json()["error"]["code"] == "USAGE"
