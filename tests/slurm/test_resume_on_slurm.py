"""The resume contract on the real Slurm cluster: a retried split is attempt 2 and starts
from the newest complete checkpoint, not from the one its first attempt was writing."""

from __future__ import annotations

import sys
from pathlib import Path

PROGRAMS = Path(__file__).resolve().parents[1] / "programs"


def test_a_split_killed_mid_checkpoint_resumes_from_the_last_complete_one(
    cli, write, tmp_path, devstack
):
    env = {"SLURM_CONF": devstack["SLURM_CONF"]}
    ckpt = tmp_path / "ckpt"
    path = write(
        f"""
        launcher: none
        splits: 1
        command: [{sys.executable}, {PROGRAMS / "checkpointer.py"}]
        env: {{CKPT: {ckpt}, CRASH_AT: 3}}
        checkpoint: {{dir: {ckpt}}}
        slurm: {{nodes: 1, time: "00:05:00"}}
        """
    )
    first = cli("run", str(path), "--json", env=env, timeout=180)
    assert first.rc == 1, first.err
    run = first.json()
    retried = cli("retry", run["id"], "--failed", "--json", env=env, timeout=180)
    assert retried.rc == 0, retried.err
    second = retried.json()["splits"][0]["attempts"][1]
    log = cli("logs", second["id"], env=env).out
    assert f"attempt=2 resume_from={ckpt / 'step_2'}" in log
    assert "done at step 5" in log
