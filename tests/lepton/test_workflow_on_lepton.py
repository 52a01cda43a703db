"""Workflows on the Lepton emulator: a controller SIGKILLed mid-workflow is replaced by
the next `status`, which finishes the workflow with no step submitted twice; and the
agent's way, `execute_step` split by split, polled with `LeptonSDK.get_job_status`, with
only the failed splits submitted again."""

from __future__ import annotations

import os
import signal
from collections import Counter

import psutil
from lepton_helpers import MOUNT, NODE_GROUP, volume_dir, wait_until

from anylaunch import workflow
from anylaunch.sdk.lepton_sdk import LeptonSDK
from anylaunch.store import Store

FAST = {"ANYLAUNCH_WORKFLOW_POLL_S": "0.3"}


def test_a_killed_controller_is_resumed_by_status_and_no_step_runs_twice(
    lcli_proc, write, emulator, tmp_path, home
):
    gate = volume_dir(emulator, f"{MOUNT}/go")
    gate.parent.mkdir(parents=True, exist_ok=True)
    path = write(
        f"""
        name: kill
        image: python:3.11
        launcher: none
        lepton: {{resource_shape: cpu.small, dedicated_node_group: {NODE_GROUP}}}
        steps:
          first:
            command: [bash, -c, "echo first"]
          middle:
            needs: [first]
            splits: 2
            command: [bash, -c, "while [ ! -e {MOUNT}/go ]; do sleep 0.2; done; echo middle $SPLIT_ID"]
          last:
            needs: [middle]
            command: [bash, -c, "echo last"]
        """,
        "wf.yaml",
    )
    started = lcli_proc("run", str(path), "--detach", "--json", env=FAST)
    assert started.rc == 0, started.err
    wf_id = started.json()["id"]
    store = Store(home)

    def middle_running() -> bool:
        step = lcli_proc("status", wf_id, "--json", env=FAST).json()["steps"][1]
        return step["state"] == "RUNNING" and len(step["splits"]) == 2

    wait_until(middle_running, timeout=120, what="the middle step to run")
    controller = store.get_workflow(wf_id).controller
    assert controller is not None
    os.kill(int(controller["pid"]), signal.SIGKILL)
    wait_until(
        lambda: (
            not psutil.pid_exists(int(controller["pid"]))
            or psutil.Process(int(controller["pid"])).status() == psutil.STATUS_ZOMBIE
        ),
        what="the controller to die",
    )
    gate.touch()  # the middle step ends while nothing advances the workflow

    def finished() -> str:
        return lcli_proc("status", wf_id, "--json", env=FAST).json()["state"]

    wait_until(lambda: finished() == "SUCCEEDED", timeout=180, what="the workflow to finish")
    # `status` may see the end before the controller's next pass does: then it leaves.
    wait_until(
        lambda: lcli_proc("status", wf_id, "--json").json()["controller"] is False,
        timeout=60,
        what="the controller to leave once the workflow ended",
    )
    final = lcli_proc("status", wf_id, "--json").json()
    new = store.get_workflow(wf_id).controller
    assert new is not None and new["pid"] != controller["pid"]  # a new controller did it
    attempts = [len(split["attempts"]) for s in final["steps"] for split in s["splits"]]
    assert attempts == [1, 1, 1, 1]
    ids = [split["attempts"][0]["id"] for s in final["steps"] for split in s["splits"]]
    labels = Counter(
        (job.metadata.get("labels") or {}).get("anylaunch-job-id")
        for job in emulator.world.jobs.values()
    )
    assert {i: labels[i] for i in ids} == {i: 1 for i in ids}
    assert len(emulator.world.jobs) == 4  # every step once, nothing else


def test_execute_step_per_split_polled_with_get_job_status_retries_only_failed_splits(
    write, emulator, tmp_path, home
):
    marks = f"{MOUNT}/marks"
    volume_dir(emulator, marks).mkdir(parents=True)
    path = write(
        f"""
        name: agent
        image: python:3.11
        launcher: none
        lepton: {{resource_shape: cpu.small, dedicated_node_group: {NODE_GROUP}}}
        steps:
          generate:
            splits: 8
            command:
              - bash
              - -c
              - 'if [ "$SPLIT_ID" = 3 ] || [ "$SPLIT_ID" = 6 ]; then [ -e {marks}/$SPLIT_ID ] || {{ touch {marks}/$SPLIT_ID; exit 5; }}; fi; echo video $SPLIT_ID'
        """,
        "wf.yaml",
    )
    plan = workflow.load(str(path))
    sdk = LeptonSDK()
    job_ids = {
        i: workflow.execute_step(plan, "generate", extra_args={"split_id": i}) for i in range(8)
    }
    assert len(set(job_ids.values())) == 8

    def all_done(ids: dict[int, str]) -> dict[int, str]:
        found = {i: sdk.get_job_status(j)["status"] for i, j in ids.items()}
        return found if all(s in ("Complete", "Error") for s in found.values()) else {}

    first = wait_until(lambda: all_done(job_ids), timeout=180, what="every split to end")
    failed = sorted(i for i, s in first.items() if s == "Error")
    assert failed == [3, 6]

    again = {i: workflow.execute_step(plan, "generate", extra_args={"split_id": i}) for i in failed}
    assert set(again.values()).isdisjoint(job_ids.values())
    second = wait_until(lambda: all_done(again), timeout=180, what="the retried splits to end")
    assert set(second.values()) == {"Complete"}
    # A split that succeeded is never submitted again: the same id comes back.
    assert workflow.execute_step(plan, "generate", extra_args={"split_id": 0}) == job_ids[0]
    status = workflow.get(plan.recorded_id).status()
    assert [len(s["attempts"]) for s in status["steps"][0]["splits"]] == [1, 1, 1, 2, 1, 1, 2, 1]
    assert status["state"] == "SUCCEEDED" and status["mode"] == "manual"
    assert len(emulator.world.jobs) == 10
