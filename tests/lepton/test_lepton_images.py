"""Replicas run in the image the job names and see only the mounts it declares."""

from __future__ import annotations

import sys

import httpx
import pytest
from lepton_helpers import ROOT, wait_until

from lepton_emulator import sandbox

pytestmark = pytest.mark.skipif(
    not sandbox.namespaces_work(), reason="needs unshare and mount (root) for replica roots"
)
GROUP = "ng-h100-pool-7x2k"


def body(image: str, script: str, **spec) -> dict:
    return {
        "metadata": {"id": "img"},
        "spec": {
            "resource_shape": "cpu.small",
            "container": {"image": image, "command": ["/bin/bash", "-c", script]},
            **spec,
        },
    }


def run(emulator, job: dict) -> tuple[str, str, list[dict]]:
    """Create the job and wait until it ends or a replica cannot start."""
    http = httpx.Client(
        base_url=emulator.url, headers={"Authorization": f"Bearer {emulator.token}"}, timeout=30
    )
    created = http.post("/jobs", json=job)
    assert created.status_code == 200, created.text
    job_id = created.json()["metadata"]["id"]

    def settled():
        state = http.get(f"/jobs/{job_id}").json()["status"]["state"]
        events = http.get(f"/jobs/{job_id}/events").json()
        stuck = any(e["reason"] in ("Failed", "FailedMount") for e in events)
        return (state, events) if state in ("Completed", "Failed") or stuck else None

    state, events = wait_until(settled, timeout=120, what="the job to end")
    text = "".join(r.text() for r in emulator.world.jobs[job_id].replicas)
    return state, text, events


PROBE = f"""
for mod in anylaunch boto3 yaml json; do
  python3 -c "import $mod" 2>/dev/null && echo "$mod=yes" || echo "$mod=no"
done
for path in /mnt/lustre /mnt/filestore {ROOT} {sys.prefix} /lustre; do
  [ -e "$path" ] && echo "seen $path" || echo "absent $path"
done
cat /mnt/lustre/hello.txt
echo from-the-replica > /mnt/lustre/out.txt
"""


def test_a_bare_replica_has_the_standard_library_and_only_its_declared_mount(emulator):
    folder = emulator.world.volumes / "lustre" / "fsw" / "portfolios" / "edgeai" / "data"
    folder.mkdir(parents=True)
    (folder / "hello.txt").write_text("hello-from-the-volume\n")
    mount = {
        "path": "/lustre/fsw/portfolios/edgeai/data",
        "from": "node-nfs:lustre",
        "mount_path": "/mnt/lustre",
    }
    job = body(
        "python:3.11",
        PROBE,
        affinity={"allowed_dedicated_node_groups": [GROUP]},
        mounts=[mount],
    )
    state, text, _ = run(emulator, job)
    assert state == "Completed", text
    assert "anylaunch=no" in text and "boto3=no" in text and "yaml=no" in text
    assert "json=yes" in text
    assert "seen /mnt/lustre" in text and "hello-from-the-volume" in text
    for hidden in ("/mnt/filestore", str(ROOT), sys.prefix, "/lustre"):
        assert f"absent {hidden}" in text
    assert (folder / "out.txt").read_text() == "from-the-replica\n"


def test_the_pytorch_image_has_torch_and_numpy_and_not_anylaunch(emulator, torch):
    probe = (
        "python3 -c \"import torch; print('torch', torch.__version__)\";"
        " python3 -c \"import numpy, torch; print('numpy', torch.from_numpy(numpy.arange(4)).sum().item())\";"
        ' python3 -c "import anylaunch" 2>/dev/null || echo no-anylaunch;'
        " command -v torchrun >/dev/null && echo has-torchrun"
    )
    state, text, _ = run(emulator, body("nvcr.io/nvidia/pytorch:25.08-py3", probe))
    assert state == "Completed", text  # public: pulled without an image pull secret
    assert "torch 2.13.0" in text and "no-anylaunch" in text and "has-torchrun" in text
    # Every NGC PyTorch image has numpy: torch finds it and says nothing.
    assert "numpy 6" in text and "Failed to initialize NumPy" not in text, text


@pytest.mark.parametrize(
    ("image", "why"),
    [
        ("registry.example.com/team/private:1", "not found or no access"),
        ("nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt", "401 Unauthorized"),
    ],
)
def test_unknown_and_private_images_fail_to_pull(emulator, image, why):
    _, text, events = run(emulator, body(image, "echo ran"))
    failed = [e for e in events if e["reason"] == "Failed"]
    assert failed and why in failed[0]["message"] and image in failed[0]["message"]
    assert "ran" not in text


def test_a_mount_outside_the_storage_permissions_fails_at_start(emulator):
    mount = {"path": "/lustre/private", "from": "node-nfs:lustre", "mount_path": "/data"}
    job = body(
        "python:3.11",
        "echo ran",
        affinity={"allowed_dedicated_node_groups": [GROUP]},
        mounts=[mount],
    )
    _, text, events = run(emulator, job)
    failed = [e for e in events if e["reason"] == "FailedMount"]
    assert failed and "/lustre/private" in failed[0]["message"] and "ran" not in text
