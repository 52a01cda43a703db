"""Run by the official leptonai SDK's own interpreter (tests/lepton/test_lepton_official_sdk.py).

Argv: workspace id, workspace URL; the token comes in LEPTON_WORKSPACE_TOKEN. Drives the
emulator through the SDK's APIClient only and prints one JSON object of what it saw.
"""

import json
import os
import sys
import time

import requests
from leptonai.api.v2.client import APIClient
from leptonai.api.v2.types.common import Metadata
from leptonai.api.v2.types.deployment import EnvVar, LeptonContainer
from leptonai.api.v2.types.job import LeptonJob, LeptonJobUserSpec

workspace, url = sys.argv[1], sys.argv[2]
token = os.environ["LEPTON_WORKSPACE_TOKEN"]
client = APIClient(workspace_id=workspace, auth_token=token, url=url)
out = {}

spec = LeptonJobUserSpec(
    resource_shape="cpu.small",
    container=LeptonContainer(
        image="python:3.11",
        command=["/bin/bash", "-c", "echo hello-from-$LEPTON_JOB_NAME; echo A=$A"],
    ),
    envs=[EnvVar(name="A", value="1")],
)
job = client.job.create(LeptonJob(metadata=Metadata(id="sdk-job", labels={"team": "x"}), spec=spec))
job_id = job.metadata.id_
out["created"] = {"id": job_id, "name": job.metadata.name}

deadline = time.time() + 120
while time.time() < deadline:
    state = client.job.get(job_id).status.state.value
    if state in ("Completed", "Failed"):
        break
    time.sleep(0.3)
out["state"] = state
out["listed"] = [j.metadata.id_ for j in client.job.list_all()]
out["by_label"] = [j.metadata.id_ for j in client.job.list_all(query="team=x")]
out["by_other_label"] = [j.metadata.id_ for j in client.job.list_all(query="team=y")]
# The set-based selector a poll sends (`anylaunch-job-id in (a,b,...)`), as the SDK sends it.
out["by_set"] = [j.metadata.id_ for j in client.job.list_all(query="team in (y,x)")]
out["by_other_set"] = [j.metadata.id_ for j in client.job.list_all(query="team in (y,z)")]
replicas = client.job.get_replicas(job_id)
out["replicas"] = [r.metadata.id_ for r in replicas]
out["stream"] = "".join(client.job.get_log(job_id, replicas[0], timeout=30))
history = client.log.get_log(name_or_job=job_id)  # no time range: the default one
out["history"] = [v[1] for s in history["data"]["result"] for v in s["values"]]
out["deleted"] = client.job.delete(job_id)
out["after_delete"] = [j.metadata.id_ for j in client.job.list_all()]

# Bodies the SDK's client-side validation lets through but Lepton refuses: sent raw.
raw = {
    "env_value_not_a_string": {"envs": [{"name": "A", "value": 1}]},
    "mount_without_from": {"mounts": [{"path": "/x", "mount_path": "/data"}]},
    "negative_ttl": {"ttl_seconds_after_finished": -1},
    "no_image": {"container": {"command": ["true"]}},
    "no_shape": {"resource_shape": None},
    "reserved_env": {"envs": [{"name": "LEPTON_WORKSPACE_ID", "value": "w"}]},
}
base = {"resource_shape": "cpu.small", "container": {"image": "python:3.11"}}
out["refused"] = {}
for case, change in raw.items():
    body = {"metadata": {"id": "bad-job"}, "spec": {**base, **change}}
    body["spec"] = {k: v for k, v in body["spec"].items() if v is not None}
    resp = requests.post(
        url + "/jobs", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    out["refused"][case] = [resp.status_code, resp.json().get("code")]

# Two live jobs may share a name: each gets its own id.
twins = [client.job.create(LeptonJob(metadata=Metadata(id="twin"), spec=spec)) for _ in "ab"]
out["twins"] = [t.metadata.id_ for t in twins]
for twin in twins:
    client.job.delete(twin.metadata.id_)
# A node group's nodes as the SDK's CLI lists them for --node-id, and a job whose
# affinity allows only some of them (the CLI's LeptonResourceAffinity).
from leptonai.api.v2.types.affinity import LeptonResourceAffinity  # noqa: E402

group = "ng-h100-pool-7x2k"
nodes = [n.metadata.id_ for n in client.nodegroup.list_nodes(group)]
out["nodes"] = nodes
spec.affinity = LeptonResourceAffinity(
    allowed_dedicated_node_groups=[group], allowed_nodes_in_node_group=nodes[2:]
)
placed = client.job.create(LeptonJob(metadata=Metadata(id="placed"), spec=spec))
deadline = time.time() + 60
while time.time() < deadline and not client.job.get_replicas(placed.metadata.id_):
    time.sleep(0.5)
replicas = client.job.get_replicas(placed.metadata.id_)
out["placed_on"] = sorted({r.status.node.id_ for r in replicas if r.status and r.status.node})
client.job.delete(placed.metadata.id_)
print(json.dumps(out))
