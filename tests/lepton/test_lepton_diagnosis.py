"""`anylaunch diagnose` on a Lepton job and the facade's get_failure_analysis read the
same evidence through the same classifier: for every failure fault the emulator can
inject, both name the same class and err_class."""

from __future__ import annotations

import pytest
from lepton_helpers import wait_until

from anylaunch import api
from anylaunch.sdk import LeptonSDK


@pytest.fixture
def sdk(emulator):
    return LeptonSDK(pending_timeout_s=1.0)


# fault kind -> (fault settings, job settings, the class both must name)
FAULTS = {
    "oom": ({"after_s": 0.3}, {}, "OOM_HOST"),
    "exit": ({"after_s": 0.3, "exit_code": 3}, {}, "USER_ERROR"),
    "evict": ({"after_s": 0.3}, {"eviction_retries": 0}, "PREEMPTED"),
    "mount_error": ({}, {}, "CONTAINER_MOUNT"),
    "image_pull": ({}, {}, "IMAGE_PULL"),
}


def _failed(sdk, job_id: str) -> dict | None:
    analysis = sdk.get_failure_analysis(job_id)
    return analysis if analysis and analysis.get("code") not in (None, "UNKNOWN") else None


@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_anylaunch_diagnose_and_the_facade_name_the_same_class(sdk, emulator, kind):
    fault, extra, expected = FAULTS[kind]
    emulator.add_fault(kind=kind, job=f"diag-{kind.replace('_', '-')}-*", **fault)
    job_id = sdk.create_job(
        image="python:3.11",
        command="sleep 30",
        name=f"diag-{kind.replace('_', '-')}",
        resource_shape="cpu.small",
        **extra,
    )
    analysis = wait_until(lambda: _failed(sdk, job_id), what=f"a {kind} failure", timeout=60)
    api.get(job_id).status()  # the store catches up with what the facade saw
    diagnosis = api.get(job_id).diagnose()
    assert (analysis["code"], analysis["err_class"]) == (expected, diagnosis.err_class)
    assert diagnosis.code == expected


def test_a_job_queued_past_the_threshold_is_no_capacity_in_both(sdk, emulator):
    emulator.add_fault(kind="stuck_queue", job="diag-queued-*")
    job_id = sdk.create_job(
        image="python:3.11", command="sleep 30", name="diag-queued", resource_shape="cpu.small"
    )
    analysis = wait_until(lambda: sdk.get_failure_analysis(job_id), what="the pending threshold")
    diagnosis = api.get(job_id).diagnose()
    assert analysis["err_class"] == diagnosis.err_class == "ERR_CAPACITY"
    assert analysis["code"] == diagnosis.code == "NO_CAPACITY"
