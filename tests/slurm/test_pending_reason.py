"""`anylaunch ps/status` say why a Slurm job is pending, in plain words (real cluster)."""

from __future__ import annotations

import time


def test_a_held_job_says_it_is_held_and_how_to_release_it(cli_inproc, write, devstack):
    env = {"SLURM_CONF": devstack["SLURM_CONF"]}
    path = write(
        "launcher: none\ncommand: [sleep, '60']\nslurm: {nodes: 1, sbatch_lines: ['--hold']}\n"
    )
    job = cli_inproc("run", str(path), "--detach", "--json", env=env).json()
    try:
        deadline = time.monotonic() + 30
        detail = None
        while time.monotonic() < deadline and not detail:
            status = cli_inproc("status", job["id"], "--json", env=env).json()
            detail = status["detail"]
            time.sleep(0.5)
        assert status["state"] == "PENDING"
        assert detail == "pending (JobHeldUser): held by you — release it with scontrol release"
    finally:
        assert cli_inproc("cancel", job["id"], "--json", env=env).json()["state"] == "CANCELLED"
