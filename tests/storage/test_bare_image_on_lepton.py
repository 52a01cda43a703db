"""The whole Lepton job contract in a bare image (python3 and its standard library only):
S3 inputs staged in, a checkpoint on the node group's Lustre volume, one eviction and a
resume from the newest checkpoint, outputs uploaded."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from helpers import wait_until
from lepton_emulator import sandbox

PROGRAM = Path(__file__).resolve().parents[1] / "lepton" / "programs" / "stdlib_trainer.py"
PERMITTED = Path("lustre") / "fsw" / "portfolios" / "edgeai"  # seen at /mnt/lustre


@pytest.mark.slow
@pytest.mark.skipif(not sandbox.namespaces_work(), reason="needs unshare (root)")
def test_a_bare_image_job_stages_in_resumes_after_eviction_and_uploads(
    cli, write, tmp_path, s3client, bucket, cli_env, lepton_server
):
    for name in ("a.txt", "b.txt"):
        s3client.put_object(Bucket=bucket, Key=f"train/{name}", Body=name.encode())
    path = write(
        f"""
        name: bare-e2e
        image: python:3.11
        launcher: none
        nodes: 2
        command: python3 /mnt/lustre/programs/stdlib_trainer.py 6 0.1
        env: {{HOLD_AT_STEP: 3}}
        inputs: {{data: s3://{bucket}/train/}}
        outputs: {{results: s3://{bucket}/out/}}
        checkpoint:
          dir: /mnt/lustre/ckpt
        lepton:
          resource_shape: cpu.small
          dedicated_node_group: h100-pool
          can_be_preempted: true
        """
    )
    outside = [cli_env["S3_ENDPOINT_URL"]]  # the S3 server: a job reaches it, as on Lepton
    with lepton_server.open(state_dir=tmp_path / "emulator", seed=5, outside=outside) as emulator:
        volume = emulator.world.volumes / PERMITTED
        (volume / "programs").mkdir(parents=True)
        shutil.copy(PROGRAM, volume / "programs" / PROGRAM.name)
        env = {**cli_env, **emulator.env()}
        started = cli("run", str(path), "--detach", "--json", env=env, timeout=300)
        assert started.rc == 0, started.err
        job_id = started.json()["id"]
        # Evicted once it has a checkpoint: the first attempt holds after step 3.
        wait_until(lambda: (volume / "ckpt" / "step-3.ckpt").exists(), timeout=240)
        emulator.add_fault(kind="evict", job="bare-e2e-*", after_s=0, count=1)
        job = wait_until(
            lambda: (
                (seen := cli("status", job_id, "--json", env=env).json())["state"]
                in ("SUCCEEDED", "FAILED", "CANCELLED", "PREEMPTED")
                and seen
            ),
            timeout=300,
            what="the job to end",
            interval=0.5,
        )
        logs = cli("logs", job_id, env=env).out
        assert job["state"] == "SUCCEEDED", logs
        checkpoints = sorted(p.name for p in (volume / "ckpt").iterdir())
    assert "node 0 inputs ['a.txt', 'b.txt']" in logs and "node 1 inputs" in logs
    assert "--- anylaunch: attempt 2" in logs and "node 0 resumed from step 3" in logs
    assert "step-6.ckpt" in checkpoints
    summary = s3client.get_object(Bucket=bucket, Key="out/summary.txt")["Body"].read().decode()
    assert summary == "trained on a.txt,b.txt from step 3\n"
