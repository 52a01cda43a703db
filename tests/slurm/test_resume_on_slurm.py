"""The resume contract on the real Slurm cluster: a retried split is attempt 2 and starts
from the newest complete checkpoint, not from the one its first attempt was writing."""

from __future__ import annotations

from helpers import assert_retry_resumes_from_step_2, job_crashing_mid_checkpoint


def test_a_split_killed_mid_checkpoint_resumes_from_the_last_complete_one(
    cli_inproc, write, tmp_path, devstack
):
    env = {"SLURM_CONF": devstack["SLURM_CONF"]}
    ckpt = tmp_path / "ckpt"
    path = job_crashing_mid_checkpoint(write, ckpt, 'slurm: {nodes: 1, time: "00:05:00"}')
    first = cli_inproc("run", str(path), "--json", env=env, timeout=180)
    assert first.rc == 1, first.err
    assert_retry_resumes_from_step_2(cli_inproc, first.json()["id"], ckpt, env=env, timeout=180)
