"""The resume contract on the local backend: an attempt starts from the newest complete
checkpoint, never from one whose write was cut off."""

from __future__ import annotations

import sys

from helpers import assert_retry_resumes_from_step_2, job_crashing_mid_checkpoint


def test_a_job_killed_mid_write_of_checkpoint_3_resumes_from_checkpoint_2(cli, write, tmp_path):
    ckpt = tmp_path / "ckpt"
    first = cli("run", str(job_crashing_mid_checkpoint(write, ckpt)), "--json")
    assert first.rc == 1
    assert (ckpt / "step_3").is_dir() and not (ckpt / "step_3" / ".complete").exists()
    assert_retry_resumes_from_step_2(cli, first.json()["id"], ckpt)


def test_the_recipe_gets_the_checkpoint_as_restore_from_path(cli, write, tmp_path):
    ckpt = tmp_path / "ckpt"
    (ckpt / "epoch_0_step_100").mkdir(parents=True)
    (ckpt / "epoch_0_step_100" / "COMPLETE").write_text("")
    (ckpt / "epoch_0_step_200").mkdir()  # cut off: no marker
    path = write(
        f"""
        launcher: none
        nodes: 2
        restore_from:
          path: {ckpt}/latest
        checkpoint:
          checkpoint_dir: {ckpt}
        """
    )
    program = "import sys, yaml; print('restore', yaml.safe_load(open(sys.argv[1]))['restore_from']['path'])"
    result = cli("run", str(path), "--json", "--", sys.executable, "-c", program, "{config}")
    assert result.rc == 0, result.err
    logs = cli("logs", result.json()["id"]).out
    for node in (0, 1):
        assert f"[node {node}] restore {ckpt / 'epoch_0_step_100'}" in logs
