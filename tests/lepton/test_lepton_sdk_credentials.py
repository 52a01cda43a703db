"""The LeptonSDK facade works on the credentials it was given, not on the environment,
and never changes the environment."""

from __future__ import annotations

import os

from anylaunch import api
from anylaunch.sdk import LeptonSDK
from anylaunch.state import State

KEYS = ("LEPTON_WORKSPACE_ID", "LEPTON_AUTH_TOKEN", "LEPTON_WORKSPACE_URL")


def test_create_job_and_cancel_use_the_given_credentials_and_leave_the_environment_alone(
    emulator, monkeypatch
):
    given = emulator.env()
    sdk = LeptonSDK(
        given["LEPTON_WORKSPACE_ID"],
        given["LEPTON_AUTH_TOKEN"],
        workspace_url=given["LEPTON_WORKSPACE_URL"],
    )
    # The environment now names no workspace: only the SDK's own credentials can work.
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    before = dict(os.environ)
    job_id = sdk.create_job(image="python:3.12-slim", command="sleep 300", gpu_count=1)
    assert dict(os.environ) == before
    native = api.get(job_id).record.native_id
    assert native and sdk.get_job_status(job_id)["job_id"] == native
    sdk.cancel(job_id)
    assert dict(os.environ) == before
    # Stopped on the workspace the SDK names, and polled through it to the end.
    assert api.get(job_id).record.state is State.CANCELLED
