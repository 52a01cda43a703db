"""The resume contract on the local backend: an attempt starts from the newest complete
checkpoint, never from one whose write was cut off."""

from __future__ import annotations

import sys
from pathlib import Path

PROGRAMS = Path(__file__).resolve().parent / "programs"


def test_a_job_killed_mid_write_of_checkpoint_3_resumes_from_checkpoint_2(cli, write, tmp_path):
    ckpt = tmp_path / "ckpt"
    path = write(
        f"""
        launcher: none
        splits: 1
        command: [{sys.executable}, {PROGRAMS / "checkpointer.py"}]
        env: {{CKPT: {ckpt}, CRASH_AT: 3}}
        checkpoint: {{dir: {ckpt}}}
        """
    )
    first = cli("run", str(path), "--json")
    assert first.rc == 1
    run = first.json()
    assert (ckpt / "step_3").is_dir() and not (ckpt / "step_3" / ".complete").exists()
    retried = cli("retry", run["id"], "--failed", "--json")
    assert retried.rc == 0, retried.err
    second = retried.json()["splits"][0]["attempts"][1]
    log = cli("logs", second["id"]).out
    assert f"attempt=2 resume_from={ckpt / 'step_2'}" in log
    assert "done at step 5" in log


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
