"""A client written against the real API (the requests the official leptonai SDK 0.47.1
sends) works unchanged against the emulator: raw httpx, no anylaunch client code."""

from __future__ import annotations

import time

import httpx
from lepton_helpers import wait_until

SAMPLE_BODY = {
    "metadata": {"id": "my-job"},
    "spec": {
        "resource_shape": "gpu.8xh100-sxm",
        "affinity": {"allowed_dedicated_node_groups": ["ng-h100-pool-7x2k"]},
        "container": {
            "image": "docker.io/pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",  # no pull secret needed
            "command": ["/bin/bash", "-c", "echo hi; echo secret=$HF_TOKEN; sleep 30"],
        },
        "completions": 2,
        "parallelism": 2,
        "envs": [
            {"name": "A", "value": "1"},
            {"name": "HF_TOKEN", "value_from": {"secret_name_ref": "hf"}},
        ],
        "mounts": [
            {
                "path": "/lustre/fsw/portfolios/edgeai/data",
                "from": "node-nfs:lustre",
                "mount_path": "/mnt/data",
            }
        ],
        "image_pull_secrets": [],
        "ttl_seconds_after_finished": 600,
        "intra_job_communication": True,
        "queue_config": {"priority_class": "mid-4000"},
    },
}


def sdk_client(emulator) -> httpx.Client:
    return httpx.Client(
        base_url=emulator.url, headers={"Authorization": f"Bearer {emulator.token}"}, timeout=30
    )


def test_sdk_requests_get_sdk_shapes_back(emulator):
    http = sdk_client(emulator)
    assert http.post("/usersecrets", json=[{"name": "hf", "value": "hf_x"}]).status_code < 400
    assert [s["name"] for s in http.get("/usersecrets").json()] == ["hf"]
    assert "value" not in http.get("/usersecrets").json()[0]

    created = http.post("/jobs", json=SAMPLE_BODY)
    assert created.status_code < 400
    job = created.json()
    job_id = job["metadata"]["id"]
    assert job["metadata"]["name"] == "my-job" and job_id.startswith("my-job-")
    assert isinstance(job["metadata"]["created_at"], int) and job["status"]["state"] in (
        "Queueing",
        "Starting",
    )
    assert created.headers.get("x-request-id")

    got = http.get(f"/jobs/{job_id}", params={"job_query_mode": "alive_and_archive"}).json()
    assert got["spec"]["completions"] == 2 and got["spec"]["envs"][1]["value_from"] == {
        "secret_name_ref": "hf"
    }
    listed = http.get(
        "/jobs",
        params=[
            ("job_query_mode", "alive_only"),
            ("status", "Running"),
            ("status", "Queueing"),
            ("status", "Starting"),
            ("node_groups", "ng-h100-pool-7x2k"),
            ("created_by", "user@example.com"),
            ("page", "1"),
            ("page_size", "500"),
        ],
    ).json()
    assert [j["metadata"]["id"] for j in listed["jobs"]] == [job_id]
    page2 = http.get("/jobs", params={"page": 2, "page_size": 500}).json()
    assert page2 == {"jobs": []}  # the SDK's list_all stops on an empty page

    replicas = wait_until(
        lambda: len(r := http.get(f"/jobs/{job_id}/replicas").json()) == 2 and r, what="replicas"
    )
    for index, replica in enumerate(sorted(replicas, key=lambda r: r["id"])):
        assert replica["id"] == replica["metadata"]["id"]
        assert (
            replica["id"].startswith(f"{job_id}-{index}-")
            and len(replica["id"].split("-")[-1]) == 5
        )
        assert replica["status"]["node"]["name"]
    wait_until(lambda: http.get(f"/jobs/{job_id}").json()["status"]["state"] == "Running")

    events = http.get(f"/jobs/{job_id}/events").json()
    assert events and all(
        {"type", "reason", "count", "last_observed_time"} <= set(e) for e in events
    )

    rid = replicas[0]["id"]
    with http.stream("GET", f"/jobs/{job_id}/replicas/{rid}/log", timeout=3) as stream:
        first = next(stream.iter_text())
    assert "hi" in first and "secret=hf_x" in first  # the secret reached the replica

    now = time.time_ns()
    logs = http.get(
        "/logs",
        params={
            "start": now - 600 * 10**9,
            "end": now,
            "timestamps": "True",
            "direction": "backward",
            "limit": 5000,
            "q": "",
            "job_query_mode": "alive_and_archive",
            "job": job_id,
            "replica": rid,
        },
    ).json()
    values = logs["data"]["result"][0]["values"]
    assert logs["data"]["result"][0]["stream"]["replica"] == rid
    assert all(isinstance(v[0], str) and v[0].isdigit() for v in values)
    assert [v[1] for v in values][-1] == "hi"  # backward: newest first

    assert http.patch(f"/jobs/{job_id}", json={"spec": {"stopped": True}}).status_code < 400
    assert http.get(f"/jobs/{job_id}").json()["status"]["state"] == "Stopped"
    assert http.get(f"/jobs/{job_id}/replicas").json() == []
    assert http.delete(f"/jobs/{job_id}", params={"job_query_mode": "alive_only"}).status_code < 400
    assert http.get(f"/jobs/{job_id}", params={"job_query_mode": "alive_only"}).status_code == 404
    archived = http.get(f"/jobs/{job_id}", params={"job_query_mode": "alive_and_archive"})
    assert archived.status_code == 200
    assert http.delete("/jobs/nope-1234").status_code == 404


def test_workspace_resources_have_the_sdk_shapes(emulator):
    http = sdk_client(emulator)
    groups = http.get("/dedicated-node-groups").json()
    assert all({"metadata", "spec", "status"} <= set(g) for g in groups)
    group = http.get(f"/dedicated-node-groups/{groups[0]['metadata']['id']}").json()
    assert all({"from", "size_in_gb"} <= set(v) for v in group["spec"]["volumes"])
    nodes = http.get(f"/dedicated-node-groups/{group['metadata']['id']}/nodes").json()
    assert all(isinstance(n["spec"]["unschedulable"], bool) and "status" in n for n in nodes)
    shapes = http.get("/shapes", params={"purpose": "job"}).json()
    assert "gpu.8xh100-sxm" in {s["metadata"]["id"] for s in shapes}
    perms = http.get("/storage-permission/lustre", params={"nodegroup_id": group["metadata"]["id"]})
    assert all(p["path_prefix"].startswith("/") for p in perms.json())
    info = http.get("/workspace").json()
    required = "build_time git_commit workspace_name workspace_tier workspace_state supported_shapes workspace_disk_usage_bytes workloads resource_quota"
    assert set(required.split()) <= set(info)


def test_create_rejects_what_the_sdk_validation_rejects(emulator):
    http = sdk_client(emulator)
    bad = [
        {"metadata": {"id": "Bad_Name"}, "spec": {}},
        {"metadata": {"id": "x" * 37}, "spec": {}},
        {"metadata": {"id": "ok"}, "spec": {"envs": [{"name": "LEPTON_JOB_NAME", "value": "x"}]}},
        {
            "metadata": {"id": "ok"},
            "spec": {"mounts": [{"from": "node-nfs:nope", "mount_path": "/m"}]},
        },
        {
            "metadata": {"id": "ok"},
            "spec": {"mounts": [{"from": "node-local", "mount_path": "/etc"}]},
        },
        {"metadata": {"id": "ok"}, "spec": {"resource_shape": "gpu.3xnothing"}},
        {
            "metadata": {"id": "ok"},
            "spec": {"envs": [{"name": "T", "value_from": {"secret_name_ref": "absent"}}]},
        },
    ]
    for body in bad:
        resp = http.post("/jobs", json=body)
        assert resp.status_code == 400 and resp.json()["code"] == "ValidationError", body
    assert http.get("/jobs").json()["jobs"] == []


def test_tokens_and_workspaces_are_checked_on_every_route(emulator):
    wrong = httpx.Client(base_url=emulator.url, headers={"Authorization": "Bearer nope"})
    assert wrong.get("/jobs").status_code == 401
    assert httpx.get(emulator.url + "/shapes").status_code == 401
    other = emulator.url.replace("ws-emulator", "ws-other")
    resp = httpx.get(other + "/jobs", headers={"Authorization": f"Bearer {emulator.token}"})
    assert resp.status_code == 403
