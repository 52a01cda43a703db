"""Keeping a retried Lepton job off the node its failure was pinned on. Lepton's node
affinity (LeptonResourceAffinity) is an allow-list: the next attempt allows the node
group's nodes, as `GET /dedicated-node-groups/{id}/nodes` lists them, but the bad one.
The emulator places replicas only on allowed nodes, keeps a job that does not fit
Queueing, and refuses an allow-list the real API's types or the SDK's CLI would not
send."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from lepton_helpers import NODE_GROUP, on_volume, wait_until

PROGRAMS = Path(__file__).resolve().parents[1] / "programs"
GROUP_ID = "ng-h100-pool-7x2k"


def sdk_client(emulator) -> httpx.Client:
    return httpx.Client(
        base_url=emulator.url, headers={"Authorization": f"Bearer {emulator.token}"}, timeout=30
    )


def _body(name: str, **affinity) -> dict:
    """A job as the SDK sends it, on the node group, with `affinity` added."""
    return {
        "metadata": {"id": name},
        "spec": {
            "resource_shape": "cpu.small",
            "affinity": {"allowed_dedicated_node_groups": [GROUP_ID], **affinity},
            "container": {
                "image": "docker.io/pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
                "command": ["/bin/bash", "-c", "sleep 30"],
            },
            "completions": 2,
            "parallelism": 2,
        },
    }


def _nodes(http: httpx.Client) -> list[str]:
    return [
        n["metadata"]["id"] for n in http.get(f"/dedicated-node-groups/{GROUP_ID}/nodes").json()
    ]


def test_the_node_list_has_the_fields_the_sdk_reads(emulator):
    """leptonai's Node: metadata.id, spec.unschedulable (required), status.status."""
    listed = sdk_client(emulator).get(f"/dedicated-node-groups/{GROUP_ID}/nodes").json()
    assert isinstance(listed, list) and len(listed) == 4
    for node in listed:
        assert node["metadata"]["id"] and isinstance(node["spec"]["unschedulable"], bool)
        assert node["spec"]["dedicated_node_group"] == GROUP_ID
        assert all(isinstance(s, str) for s in node["status"]["status"])


@pytest.mark.parametrize(
    ("affinity", "said"),
    [
        ({"allowed_nodes_in_node_group": ["node-nowhere-1"]}, "unknown node id(s) node-nowhere-1"),
        ({"allowed_nodes_in_node_group": []}, "is empty"),
        ({"allowed_nodes_in_node_group": "node-ip-10-50-111-20"}, "must be a list of node ids"),
        (
            {"allowed_dedicated_node_groups": None, "allowed_nodes_in_node_group": ["n"]},
            "needs spec.affinity.allowed_dedicated_node_groups",
        ),
    ],
)
def test_an_allow_list_the_real_api_would_not_take_is_refused(emulator, affinity, said):
    http = sdk_client(emulator)
    body = _body("bad-affinity", **affinity)
    answer = http.post("/jobs", json=body)
    assert answer.status_code == 400 and said in answer.json()["message"], answer.text


def test_replicas_land_only_on_allowed_nodes_and_wait_when_they_do_not_fit(emulator):
    http = sdk_client(emulator)
    every = _nodes(http)
    allowed = every[2:]
    job = http.post("/jobs", json=_body("allowed-only", allowed_nodes_in_node_group=allowed))
    assert job.status_code < 400, job.text
    job_id = job.json()["metadata"]["id"]
    replicas = wait_until(lambda: http.get(f"/jobs/{job_id}/replicas").json(), what="replicas")
    assert {r["status"]["node"]["id"] for r in replicas} <= set(allowed)

    # Two workers of 8 GPUs each on one allowed node: they cannot both fit; it waits.
    body = _body("no-fit", allowed_nodes_in_node_group=every[:1])
    body["spec"]["resource_shape"] = "gpu.8xh100-sxm"
    job_id = http.post("/jobs", json=body).json()["metadata"]["id"]
    events = wait_until(
        lambda: [
            e
            for e in http.get(f"/jobs/{job_id}/events").json()
            if e["reason"] == "FailedScheduling"
        ],
        what="a FailedScheduling event",
    )
    assert "3 node(s) didn't match Pod's node affinity/selector" in events[0]["message"]
    got = http.get(f"/jobs/{job_id}").json()
    assert (
        got["status"]["state"] == "Queueing" and http.get(f"/jobs/{job_id}/replicas").json() == []
    )


def test_an_xid_on_a_named_node_keeps_the_next_attempt_off_it(lcli_proc, write, emulator):
    programs = on_volume(emulator, PROGRAMS / "flaky.py")
    path = write(
        f"""
        name: xid-on-lepton
        image: python:3.11
        command: python3 {programs}/flaky.py
        launcher: none
        env: {{FAIL_AS: xid}}
        retry: {{max_attempts: 2, backoff: 0}}
        lepton: {{resource_shape: cpu.small, dedicated_node_group: {NODE_GROUP}}}
        """
    )
    result = lcli_proc("run", str(path), "--json", timeout=240)
    job = result.json()
    status = lcli_proc("status", job["id"], "--json").json()
    assert (result.rc, job["state"], job["attempt"]) == (0, "SUCCEEDED", 2), (
        status,
        lcli_proc("logs", job["id"]).out,
    )
    first, second = status["attempts"]
    blamed = first["diagnosis"]["node"]
    every = _nodes(sdk_client(emulator))
    assert first["diagnosis"]["code"] == "HARDWARE_GPU" and blamed in every, first
    assert second["avoided"] == [blamed] and "avoiding " + blamed in first["next"], second
    # The second attempt's job spec allowed the group's other nodes, and ran on one.
    http = sdk_client(emulator)
    sent = http.get(f"/jobs/{second['native_id']}", params={"job_query_mode": "alive_and_archive"})
    affinity = sent.json()["spec"]["affinity"]
    assert affinity["allowed_nodes_in_node_group"] == [n for n in every if n != blamed]
    ran = http.get(
        f"/jobs/{second['native_id']}/replicas", params={"job_query_mode": "alive_and_archive"}
    ).json()
    assert ran and all(r["status"]["node"]["id"] != blamed for r in ran), ran
    said = [line.split() for line in lcli_proc("status", job["id"]).out.splitlines()]
    assert ["avoided", blamed, "(where", "earlier", "attempts", "failed)"] in said, said


def test_on_the_shared_pool_the_next_attempt_says_the_node_may_be_used_again(
    lcli_proc, write, emulator
):
    """Without a dedicated node group there is no node affinity to narrow."""
    xid = "NVRM: Xid (PCI:0000:3b:00): 79, pid=2114, name=python, GPU has fallen off the bus."
    path = write(
        f"""
        name: xid-on-the-shared-pool
        image: python:3.11
        command: >-
          if [ "$ANYLAUNCH_ATTEMPT" = 1 ]; then echo '{xid}' >&2; exit 1; fi; echo done
        launcher: none
        retry: {{max_attempts: 2, backoff: 0}}
        lepton: {{resource_shape: cpu.small}}
        """
    )
    job = lcli_proc("run", str(path), "--json", timeout=240).json()
    status = lcli_proc("status", job["id"], "--json").json()
    assert len(status["attempts"]) == 2, (status, lcli_proc("logs", job["id"]).out)
    first, second = status["attempts"]
    blamed = first["diagnosis"]["node"]
    assert (
        blamed
        and f"lepton cannot keep this job off a node, so {blamed} may be used" in (first["next"])
    ), first
    assert second["avoided"] == [] and second["state"] == "SUCCEEDED", second


def test_when_every_node_of_the_group_failed_no_attempt_is_sent(lcli_proc, write, emulator):
    """Four nodes, each an attempt's Xid: the fifth attempt has nowhere to go, so the job
    ends as the fourth did, and says why."""
    programs = on_volume(emulator, PROGRAMS / "flaky.py")
    path = write(
        f"""
        name: xid-everywhere
        image: python:3.11
        command: python3 {programs}/flaky.py
        launcher: none
        env: {{FAIL_AS: xid, FAIL_UNTIL: "9"}}
        retry: {{max_attempts: 6, backoff: 0}}
        lepton: {{resource_shape: cpu.small, dedicated_node_group: {NODE_GROUP}}}
        """
    )
    job = lcli_proc("run", str(path), "--json", timeout=300).json()
    status = lcli_proc("status", job["id"], "--json").json()
    assert status["state"] == "FAILED" and len(status["attempts"]) == 4, (
        status["attempts"],
        status["detail"],
    )
    blamed = [a["diagnosis"]["node"] for a in status["attempts"]]
    assert sorted(blamed) == sorted(_nodes(sdk_client(emulator))), blamed
    assert "attempt 5 not sent: every node of node group" in status["detail"], status
