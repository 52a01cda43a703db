"""A workflow on the local backend, through the real CLI and a real detached controller:
dependency order, retry of only what failed, and cancel."""

from __future__ import annotations

import hashlib

import pytest

FAST = {"ANYLAUNCH_WORKFLOW_POLL_S": "0.3"}


@pytest.fixture
def graph(write, tmp_path):
    marker = tmp_path / "split1-failed-once"
    log = tmp_path / "order.log"
    return write(
        f"""
        name: loc
        launcher: none
        steps:
          a:
            command: [bash, -c, "echo a >> {log}"]
          b:
            needs: [a]
            splits: 3
            command:
              - bash
              - -c
              - 'echo b$SPLIT_ID >> {log}; if [ "$SPLIT_ID" = 1 ] && [ ! -e {marker} ]; then touch {marker}; exit 3; fi'
          c:
            needs: [b]
            command: [bash, -c, "echo c >> {log}"]
        """,
        "wf.yaml",
    ), log


def test_retry_failed_reruns_only_the_failed_split_then_the_steps_after_it(cli, graph):
    path, log = graph
    first = cli("run", str(path), "--json", env=FAST)
    assert first.rc == 1, first.err
    wf = first.json()
    states = {s["id"]: s["state"] for s in wf["steps"]}
    assert (wf["kind"], wf["state"]) == ("workflow", "FAILED")
    assert states == {"a": "SUCCEEDED", "b": "FAILED", "c": "BLOCKED"}
    lines = log.read_text().split()
    assert lines[0] == "a" and sorted(lines[1:]) == ["b0", "b1", "b2"]  # c never ran

    again = cli("retry", wf["id"], "--failed", "--json", env=FAST)
    assert again.rc == 0, again.err
    done = again.json()
    assert done["state"] == "SUCCEEDED"
    attempts = {s["id"]: [len(split["attempts"]) for split in s["splits"]] for s in done["steps"]}
    assert attempts == {"a": [1], "b": [1, 2, 1], "c": [1]}
    assert log.read_text().split()[4:] == ["b1", "c"]  # only split 1, then c

    status = cli("status", wf["id"])
    assert status.rc == 0 and "c: SUCCEEDED (local)  needs b" in status.out
    nothing = cli("retry", wf["id"], "--failed", "--json")
    assert nothing.rc == 0 and nothing.json()["state"] == "SUCCEEDED"


def test_cancel_stops_running_steps_and_starts_no_more(cli, write, tmp_path):
    path = write(
        """
        launcher: none
        steps:
          slow:
            command: [sleep, "300"]
          after:
            needs: [slow]
            command: [bash, -c, "echo never"]
        """,
        "wf.yaml",
    )
    started = cli("run", str(path), "--detach", "--json", env=FAST).json()
    again = cli("run", str(path), "--detach", "--json", env=FAST).json()
    assert again["id"] == started["id"]  # the same unfinished workflow, not a second one
    from tests.helpers import wait_until

    wait_until(
        lambda: cli("status", started["id"], "--json").json()["steps"][0]["state"] == "RUNNING",
        what="the first step to run",
    )
    cancelled = cli("cancel", started["id"], "--json")
    assert cancelled.rc == 0, cancelled.err
    body = cancelled.json()
    assert body["state"] == "CANCELLED"
    assert [s["state"] for s in body["steps"]] == ["CANCELLED", "CANCELLED"]
    assert body["steps"][1]["splits"] == []  # never submitted


def test_python_start_status_and_retry_failed_drive_the_same_workflow(
    graph, home, monkeypatch, spawns
):
    from anylaunch import workflow

    monkeypatch.setenv("ANYLAUNCH_WORKFLOW_POLL_S", "0.3")
    path, log = graph
    wf = workflow.load(str(path))
    run = workflow.start(wf)  # returns at once: a detached controller has it
    assert run.wait(timeout=120, poll_interval=0.3) == "FAILED"
    again = workflow.get(run.id)  # the same workflow, found by its id
    assert [s["state"] for s in again.status()["steps"]] == ["SUCCEEDED", "FAILED", "BLOCKED"]
    assert again.retry_failed() == {"b": [1]}
    assert run.wait(timeout=120, poll_interval=0.3) == "SUCCEEDED"
    assert log.read_text().split()[4:] == ["b1", "c"]


def test_a_secret_reaches_each_step_and_never_the_store_status_or_controller_log(
    cli, write, home, tmp_path
):
    planted = "hf_planted-wf-5c2e9a"
    seen = tmp_path / "seen"
    path = write(
        f"""
        launcher: none
        env: {{HF_TOKEN: "${{HF_TOKEN}}"}}
        steps:
          one:
            command: [bash, -c, 'printf %s "$HF_TOKEN" | sha256sum >> {seen}']
          two:
            needs: [one]
            command: [bash, -c, 'printf %s "$HF_TOKEN" | sha256sum >> {seen}']
        """,
        "wf.yaml",
    )
    done = cli("run", str(path), "--json", env={**FAST, "HF_TOKEN": planted})
    assert done.rc == 0, done.err
    digest = hashlib.sha256(planted.encode()).hexdigest()
    assert seen.read_text().split()[::2] == [digest, digest]  # the controller passed it on
    assert planted not in done.out + done.err
    assert planted not in cli("status", done.json()["id"], "--json").out
    for file in home.rglob("*"):  # the store, its WAL, the controller's log, job files
        if file.is_file():
            assert planted.encode() not in file.read_bytes(), file


def test_a_step_unknown_for_good_ends_the_workflow_unknown_and_runs_nothing_after_it(
    cli, write, tmp_path
):
    after = tmp_path / "after-ran"
    path = write(
        f"""
        launcher: none
        steps:
          lost:
            command: [bash, -c, 'kill -9 "$PPID"; sleep 2']
          after:
            needs: [lost]
            command: [touch, {after}]
        """,
        "wf.yaml",
    )
    done = cli("run", str(path), "--json", env=FAST, timeout=120)
    assert done.rc == 1, done.err
    wf = done.json()
    assert wf["state"] == "UNKNOWN"
    assert {s["id"]: s["state"] for s in wf["steps"]} == {"lost": "UNKNOWN", "after": "BLOCKED"}
    assert not after.exists()
