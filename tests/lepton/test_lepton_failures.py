"""Each emulated failure mode, seen through the TAO SDK calls (`LeptonSDK`): status,
replicas, and a get_failure_analysis whose err_class and suggestion name the fix."""

from __future__ import annotations

import time

import pytest
from lepton_helpers import wait_until

from anylaunch import api
from anylaunch.sdk import LeptonSDK
from anylaunch.state import State


@pytest.fixture
def sdk(emulator):
    return LeptonSDK(pending_timeout_s=1.0)


def submit(sdk, name: str, command: str = "sleep 30", **kwargs) -> str:
    kwargs.setdefault("resource_shape", "cpu.small")
    return sdk.create_job(
        image=kwargs.pop("image", "python:3.11"), command=command, name=name, **kwargs
    )


def test_oom_kill_is_a_program_error_with_a_smaller_batch_suggested(sdk, emulator):
    emulator.add_fault(kind="oom", job="oom-job-*", after_s=0.3)
    job_id = submit(sdk, "oom-job")
    assert api.get(job_id).wait(timeout=30) is State.FAILED
    assert api.get(job_id).record.exit_code == 137
    assert sdk.get_job_status(job_id)["status"] == "Error"
    analysis = sdk.get_failure_analysis(job_id)
    assert analysis["err_class"] == "ERR_PROGRAM"
    assert "batch size" in analysis["suggestion"]
    events = analysis["job_failure_by_node_event"]
    assert events[0]["node_event_name"] == "OOM" and "victim process" in events[0]["message"]


def test_image_pull_failure_points_at_ngc_key(sdk, emulator, monkeypatch):
    job_id = submit(sdk, "pull-job", image="nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt")
    replicas = wait_until(
        lambda: (r := sdk.get_job_replicas(job_id)) and "readiness_issue" in r[0]["status"] and r,
        what="a readiness issue",
    )
    assert replicas[0]["status"]["readiness_issue"]["reason"] == "Failed"
    assert sdk.get_job_status(job_id)["status"] == "Pending"
    analysis = sdk.get_failure_analysis(job_id)
    assert analysis["err_class"] == "ERR_IMAGE_PULL" and "NGC_KEY" in analysis["suggestion"]

    monkeypatch.setenv("NGC_KEY", "nvapi-valid-key")  # the fix the suggestion names
    fixed = submit(
        sdk, "pull-job", image="nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt", command="true"
    )
    assert api.get(fixed).wait(timeout=30) is State.SUCCEEDED


def test_an_unknown_private_image_is_an_image_pull_failure(sdk, emulator):
    job_id = submit(sdk, "unknown-image", image="registry.example.com/team/private:1")
    replicas = wait_until(
        lambda: (r := sdk.get_job_replicas(job_id)) and "readiness_issue" in r[0]["status"] and r,
        what="a readiness issue",
    )
    assert replicas[0]["status"]["readiness_issue"]["reason"] == "Failed"
    assert sdk.get_failure_analysis(job_id)["err_class"] == "ERR_IMAGE_PULL"


def test_job_queued_past_the_threshold_suggests_another_shape_or_node_group(sdk, emulator):
    emulator.add_fault(kind="stuck_queue", job="queued-*")
    job_id = submit(sdk, "queued")
    assert sdk.get_failure_analysis(job_id) is None  # not yet past the threshold
    time.sleep(1.2)
    assert sdk.get_job_status(job_id)["state"] == "Queueing"
    assert sdk.get_job_replicas(job_id) == []
    analysis = sdk.get_failure_analysis(job_id)
    assert analysis["err_class"] == "ERR_CAPACITY"
    assert "resource_shape" in analysis["suggestion"]
    assert "dedicated_node_group" in analysis["suggestion"]
    assert api.get(job_id).status() is State.PENDING


def test_bad_token_analysis_asks_for_a_new_token(emulator):
    analysis = LeptonSDK(auth_token="expired").get_failure_analysis("any-job")
    assert analysis["err_class"] == "ERR_AUTH" and "new token" in analysis["suggestion"]


def test_node_mount_failure_is_infra_with_cancel_and_resubmit(sdk, emulator):
    emulator.add_fault(kind="mount_error", job="mount-*", worker=0)
    job_id = submit(sdk, "mount")
    issue = wait_until(
        lambda: (r := sdk.get_job_replicas(job_id)) and r[0]["status"].get("readiness_issue"),
        what="mount failure",
    )
    assert issue["reason"] == "ConfigError" and "mount point not found" in issue["message"]
    analysis = sdk.get_failure_analysis(job_id)
    assert analysis["err_class"] == "ERR_INFRA" and "resubmit" in analysis["suggestion"]
    sdk.cancel(job_id)
    assert api.get(job_id).record.state is State.CANCELLED


def test_replica_that_never_becomes_ready_keeps_the_job_starting(sdk, emulator):
    emulator.add_fault(kind="never_ready", job="gang-*", worker=1)
    job_id = submit(sdk, "gang", num_nodes=2)
    wait_until(lambda: sdk.get_job_status(job_id)["state"] == "Running", what="Running")
    time.sleep(0.4)
    status = sdk.get_job_status(job_id)
    assert status["ready"] == 1 and status["active"] == 2
    assert api.get(job_id).status() is State.STARTING  # Running with ready < active
    analysis = sdk.get_failure_analysis(job_id)
    assert analysis["err_class"] == "ERR_INFRA" and "1 of 2" in analysis["cause"]


def test_dropped_log_stream_is_resumed_without_repeats(sdk, emulator):
    emulator.add_fault(kind="stream_drop", job="chatty-*", after_s=0.3)
    job_id = submit(sdk, "chatty", command="for i in $(seq 1 15); do echo line $i; sleep 0.1; done")
    text = "".join(sdk.stream_job_logs(job_id, poll_s=0.1))
    assert text.splitlines() == [f"line {i}" for i in range(1, 16)]


def test_program_exit_is_a_program_error_with_the_exit_code(sdk, emulator):
    job_id = submit(sdk, "crash", command="echo 'Traceback: boom' >&2; exit 3")
    assert api.get(job_id).wait(timeout=30) is State.FAILED
    assert api.get(job_id).record.exit_code == 3
    analysis = sdk.get_failure_analysis(job_id)
    assert analysis["err_class"] == "ERR_PROGRAM" and "code 3" in analysis["cause"]
    assert any("boom" in line for line in analysis["evidence"])
    assert "boom" in sdk.get_job_logs(job_id, tail=1)


def test_unknown_state_for_a_while_changes_nothing_recorded(sdk, emulator):
    emulator.add_fault(kind="unknown_state", job="vague-*", after_s=1.0)
    job_id = submit(sdk, "vague", command="sleep 1.5")
    assert sdk.get_job_status(job_id)["state"] == "UNK"
    assert api.get(job_id).status() is State.PENDING
    assert api.get(job_id).wait(timeout=30) is State.SUCCEEDED
