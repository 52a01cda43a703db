"""The client against a misbehaving gateway: retries, Retry-After, auth, lost responses."""

from __future__ import annotations

import time

import httpx
import pytest

from anylaunch import api
from anylaunch.backends.lepton.rest.client import Credentials, LeptonClient
from anylaunch.backends.lepton.rest.errors import (
    LeptonAuthError,
    LeptonCredentialsMissing,
    LeptonUnavailable,
)
from anylaunch.jobfile.spec import JobSpec
from anylaunch.observe import watch
from anylaunch.store import Store


def body(name: str) -> dict:
    return {
        "metadata": {"id": name},
        "spec": {
            "resource_shape": "cpu.small",
            "container": {"image": "python:3.11", "command": ["/bin/bash", "-c", "true"]},
        },
    }


def raw_jobs(emulator) -> list[dict]:
    resp = httpx.get(emulator.url + "/jobs", headers={"Authorization": f"Bearer {emulator.token}"})
    return resp.json()["jobs"]


def test_twenty_submissions_under_thirty_percent_faults_make_twenty_jobs(emulator, home):
    emulator.add_fault(kind="http", route="POST /jobs", status=503, rate=0.1)
    emulator.add_fault(kind="http_after", route="POST /jobs", status=502, rate=0.12)
    emulator.add_fault(kind="http", route="POST /jobs", status=429, retry_after=0, rate=0.12)
    emulator.add_fault(kind="http", route="GET /*", status=500, rate=0.3)
    emulator.add_fault(kind="http", route="POST /usersecrets", status=503, rate=0.3)
    spec = JobSpec(
        name="many", image="python:3.11", command=["true"], launcher="none",
        env={"API_TOKEN": "tok-value-1"}, lepton={"resource_shape": "cpu.small"},
    )  # fmt: skip
    store = Store()
    jobs = [api.submit(spec, "lepton", store=store) for _ in range(20)]
    fired = sum(emulator.world.faults._fired.values())
    emulator.clear_faults()
    listed = raw_jobs(emulator)
    assert len(listed) == 20, f"{len(listed)} jobs for 20 submissions ({fired} faults fired)"
    assert sorted(j["metadata"]["id"] for j in listed) == sorted(j.record.native_id for j in jobs)
    assert fired >= 10  # the faults really happened


def test_a_create_whose_answer_was_lost_is_found_not_repeated(emulator):
    emulator.add_fault(kind="http_after", route="POST /jobs", status=502, count=1)
    with LeptonClient(backoff_s=0.01) as client:
        job = client.create_job(body("lost-answer"))
    assert [j["metadata"]["id"] for j in raw_jobs(emulator)] == [job.metadata.id]


def test_retry_after_is_honoured(emulator):
    emulator.add_fault(kind="http", route="GET /shapes", status=429, retry_after=1, count=1)
    with LeptonClient(backoff_s=0.01) as client:
        started = time.monotonic()
        assert client.shapes()
        assert time.monotonic() - started >= 1.0


def test_truncated_json_is_retried_as_a_transport_fault(emulator):
    emulator.add_fault(kind="truncate", route="GET /dedicated-node-groups", count=2)
    with LeptonClient(backoff_s=0.01) as client:
        assert client.node_groups()[0].metadata.name == "h100-pool"


def test_unavailable_api_fails_after_bounded_retries(emulator):
    emulator.add_fault(kind="http", route="GET /shapes", status=503)
    client = LeptonClient(backoff_s=0.01, max_backoff_s=0.02, attempts=4)
    with client, pytest.raises(LeptonUnavailable, match=r"kept failing .*503.* after 4 tries"):
        client.shapes()


def test_bad_token_is_one_clear_error_at_once_never_retried(emulator, monkeypatch):
    monkeypatch.setenv("LEPTON_AUTH_TOKEN", "expired-token")
    with LeptonClient(backoff_s=1.0) as client:
        started = time.monotonic()
        with pytest.raises(LeptonAuthError) as caught:
            client.shapes()
    assert time.monotonic() - started < 0.5  # no backoff: not retried
    assert "401" in caught.value.message and "create a new one" in caught.value.message
    assert "expired-token" not in caught.value.message and "\n" not in caught.value.message


def test_injected_403_is_not_retried_either(emulator):
    emulator.add_fault(kind="http", route="GET /jobs", status=403, count=1)
    with LeptonClient(backoff_s=1.0) as client, pytest.raises(LeptonAuthError, match="403"):
        list(client.list_jobs())


def test_cli_run_with_a_bad_token_says_what_to_do_in_one_line(lcli, write):
    path = write(
        "image: python:3.11\ncommand: 'true'\nlauncher: none\nlepton:\n  resource_shape: cpu.small\n"
    )
    result = lcli("run", str(path), "--detach", env={"LEPTON_AUTH_TOKEN": "stale"})
    assert result.rc == 1 and "Traceback" not in result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and "token invalid or expired" in lines[0], result.err
    as_json = lcli("run", str(path), "--detach", "--json", env={"LEPTON_AUTH_TOKEN": "stale"})
    assert as_json.json()["error"]["code"] == "LEPTON_AUTH"


def test_missing_credentials_name_the_variables(monkeypatch):
    monkeypatch.delenv("LEPTON_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("LEPTON_WORKSPACE_TOKEN", raising=False)
    monkeypatch.setenv("LEPTON_WORKSPACE_ID", "ws")
    with pytest.raises(LeptonCredentialsMissing, match="LEPTON_AUTH_TOKEN not set"):
        Credentials.from_env()
    creds = Credentials.from_env({"LEPTON_WORKSPACE_ID": "ws", "LEPTON_AUTH_TOKEN": "t"})
    assert creds.url == "https://gateway.dgxc-lepton.nvidia.com/api/v2/workspaces/ws"
    assert repr(creds).endswith("token=***)")


def test_listing_pages_through_every_job(emulator):
    with LeptonClient() as client:
        made = {client.create_job(body(f"page-{i}")).metadata.id for i in range(5)}
        assert {j.metadata.id for j in client.list_jobs(page_size=2)} == made


def test_status_of_many_jobs_is_one_list_call(emulator, home):
    spec = JobSpec(
        name="batch", image="python:3.11", command=["sleep", "20"], launcher="none",
        lepton={"resource_shape": "cpu.small"},
    )  # fmt: skip
    store = Store()
    jobs = [api.submit(spec, "lepton", store=store) for _ in range(6)]
    emulator.world.calls.clear()
    watch.refresh([store.get(j.id) for j in jobs], store)
    assert dict(emulator.world.calls) == {"GET /jobs": 1}
