"""A backend from outside the package: its own folder plus one registry line.

The toy backend (`backend.py` next to this file) is registered through the environment
only, and then runs jobs through the real CLI like any built-in backend: run, status,
logs (every node, one node, a node it does not have), cancel, splits, a workflow's
step — with its secret masked in the logs and absent from the store — and its own
`toy:` section of the job file is checked and routed like a built-in backend's, without
a line of it in src/.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from helpers import wait_until

HERE = Path(__file__).resolve().parent
SECRET = "toy-secret-value-0123456789"
PRINT = "import os; print('node', os.environ['NODE_RANK'], 'token', os.environ['TOY_TOKEN'])"
SLEEP = "import time; print('up', flush=True); time.sleep(600)"


@pytest.fixture
def toy(cli):
    """The CLI with the toy backend registered (one line) and importable."""
    env = {
        "ANYLAUNCH_BACKENDS": "toy=toybackend.backend:ToyBackend",
        "PYTHONPATH": os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")]),
        "TOY_TOKEN": SECRET,
    }

    def run(*args: str, timeout: float = 120):
        return cli(*args, env=env, timeout=timeout)

    return run


def test_a_registered_backend_runs_a_job_through_the_cli(toy, write, home):
    path = write(
        f"command: [{sys.executable}, -c, {PRINT!r}]\nnodes: 2\nenv:\n  TOY_TOKEN: ${{TOY_TOKEN}}\n"
    )
    dry = toy("run", str(path), "--backend", "toy", "--dry-run", "--json")
    assert dry.rc == 0, dry.err
    assert dry.json()["plan"]["nodes"] == 2 and dry.json()["plan"]["secret_env"] == ["TOY_TOKEN"]
    assert SECRET not in dry.out

    ran = toy("run", str(path), "--backend", "toy", "--json")
    assert ran.rc == 0, ran.out + ran.err
    job = ran.json()
    assert (job["backend"], job["state"], job["exit_code"]) == ("toy", "SUCCEEDED", 0)
    assert toy("status", job["id"], "--json").json()["state"] == "SUCCEEDED"

    logs = toy("logs", job["id"]).out
    assert "[node 0] node 0 token ***" in logs and "[node 1] node 1 token ***" in logs
    assert toy("logs", job["id"], "--node", "1").out == "node 1 token ***\n"
    wrong = toy("logs", job["id"], "--node", "2")
    assert wrong.rc == 2 and "has nodes 0..1, not 2" in wrong.err
    # The job printed its token into its own logs (read back masked above); anylaunch
    # wrote it nowhere: not in the store, the plan or any other file of the job.
    kept = [p for p in home.rglob("*") if p.is_file() and p.parent.name != "logs"]
    stored = b"".join(p.read_bytes() for p in kept)
    assert SECRET.encode() not in stored and b"TOY_TOKEN" in stored


def test_a_registered_backend_cancels_a_running_job(toy, write):
    path = write(f"command: [{sys.executable}, -c, {SLEEP!r}]\n")
    job = toy("run", str(path), "--backend", "toy", "--detach", "--json").json()
    wait_until(lambda: "up" in toy("logs", job["id"]).out, 60, "the job to start")
    assert toy("status", job["id"], "--json").json()["state"] == "RUNNING"
    assert toy("cancel", job["id"], "--json").json()["state"] == "CANCELLED"
    assert toy("status", job["id"], "--json").json()["state"] == "CANCELLED"


def test_a_registered_backend_runs_the_splits_of_a_run(toy, write):
    path = write(
        f'command: [{sys.executable}, -c, \'import os; print("split", os.environ["SPLIT_ID"])\']\n'
        "splits: 3\n"
    )
    ran = toy("run", str(path), "--backend", "toy", "--json")
    assert ran.rc == 0, ran.out + ran.err
    run = ran.json()
    assert [s["state"] for s in run["splits"]] == ["SUCCEEDED"] * 3
    for split in run["splits"]:
        job_id = split["attempts"][-1]["id"]
        assert toy("logs", job_id).out == f"split {split['split_id']}\n"


LABEL = "import os; print('node', os.environ['NODE_RANK'], 'label', os.environ['TOY_LABEL'])"


def test_a_registered_backend_reads_its_own_section_of_the_job_file(toy, write):
    path = write(f"command: [{sys.executable}, -c, {LABEL!r}]\ntoy:\n  nodes: 2\n  label: hello\n")
    # The one section routes the job to the toy backend, no --backend needed.
    ran = toy("run", str(path), "--json")
    assert ran.rc == 0, ran.out + ran.err
    job = ran.json()
    assert (job["backend"], job["state"]) == ("toy", "SUCCEEDED")
    logs = toy("logs", job["id"]).out
    assert "[node 0] node 0 label hello" in logs and "[node 1] node 1 label hello" in logs


def test_a_registered_backends_section_is_checked_like_a_built_in_one(toy, write):
    path = write("command: [true]\ntoy:\n  lable: hello\n")
    typo = toy("run", str(path), "--dry-run")
    assert typo.rc == 2 and typo.err.count("\n") == 1, typo.err
    assert f"{path}:3: toy.lable: unknown key" in typo.err and "did you mean 'label'" in typo.err
    path = write("command: [true]\ntoy:\n  nodes: 9\n")
    big = toy("run", str(path), "--dry-run")
    assert (
        big.rc == 2 and f"{path}:3: toy.nodes:" in big.err and "less than or equal to 8" in big.err
    )
    path = write("command: [true]\nnodes: 3\ntoy:\n  nodes: 2\n")
    twice = toy("run", str(path), "--dry-run")
    assert twice.rc == 2 and f"{path}:4: toy.nodes: 2 disagrees with nodes: 3" in twice.err
    assert "Traceback" not in typo.err + big.err + twice.err


def test_a_section_for_a_backend_that_has_none_is_refused_at_its_line(cli_inproc, write):
    path = write("command: [true]\nplaintoy:\n  nodes: 2\n")
    env = {
        "ANYLAUNCH_BACKENDS": "plaintoy=toybackend.backend:SectionlessToyBackend",
        "PYTHONPATH": os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")]),
    }
    refused = cli_inproc("run", str(path), "--dry-run", env=env)
    assert refused.rc == 2 and refused.err.count("\n") == 1, refused.err
    assert f"{path}:2: plaintoy: the plaintoy backend has no section of its own" in refused.err
    assert "remove 'plaintoy:'" in refused.err


def test_a_section_of_an_unregistered_backend_is_the_programs_recipe(cli_inproc, write):
    path = write("command: [true]\ntoy:\n  nodes: 2\n")
    dry = cli_inproc("run", str(path), "--dry-run", "--json")
    assert dry.rc == 0, dry.err
    assert dry.json()["plan"]["backend"] == "local"


def test_an_unregistered_backend_is_a_usage_error(cli_inproc, write):
    path = write("command: [true]\n")
    result = cli_inproc("run", str(path), "--backend", "toy")
    assert result.rc == 2 and "unknown backend 'toy'" in result.err


def test_a_workflow_runs_a_step_on_a_registered_backend_beside_a_built_in_one(
    toy, write, tmp_path, monkeypatch
):
    # No workflow code names a backend: a step goes to the toy backend by its section,
    # the controller submits and polls it like any other, and a local step follows it.
    monkeypatch.setenv("ANYLAUNCH_WORKFLOW_POLL_S", "0.3")
    ran = tmp_path / "ran"
    path = write(
        f"""
        launcher: none
        steps:
          first:
            command: [bash, -c, 'echo "first $TOY_LABEL" >> {ran}']
            toy: {{label: from-toy}}
          second:
            needs: [first]
            command: [bash, -c, 'echo second >> {ran}']
        """,
        "wf.yaml",
    )
    dry = toy("run", str(path), "--dry-run")
    assert dry.rc == 0, dry.err
    assert "== step first (toy)" in dry.out and "== step second (local, needs first)" in dry.out
    done = toy("run", str(path), "--json", timeout=180)
    assert done.rc == 0, done.out + done.err
    body = done.json()
    assert (body["mode"], body["state"]) == ("controller", "SUCCEEDED")
    assert [(s["id"], s["backend"]) for s in body["steps"]] == [
        ("first", "toy"),
        ("second", "local"),
    ]
    assert ran.read_text().splitlines() == ["first from-toy", "second"]
