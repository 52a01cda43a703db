"""Lightning's own auto-requeue on the devstack Slurm cluster: a training longer than its
1-minute limit is requeued by Lightning's SIGUSR1 handler, resumes from the HPC
checkpoint it saved, and the job SUCCEEDS. It holds only if the ranks start with
SIGUSR1 as the default (Lightning installs no handler over an ignored signal) and the
batch shell passes the early signal on to the ranks that handle it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

PROGRAM = Path(__file__).resolve().parent / "programs" / "lightning_requeue.py"


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_lightning_requeues_itself_across_a_time_limit_and_succeeds(
    cli_inproc, write, tmp_path, slurm_conf, leave_no_job_behind, torch
):
    pytest.importorskip("lightning")
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    path = write(
        f"""
        name: lightning-requeue
        command: {sys.executable} {PROGRAM}
        launcher: srun
        env: {{CKPT_ROOT: {ckpt}, EPOCHS: "10", STEP_S: "3", OMP_NUM_THREADS: "1"}}
        slurm:
          nodes: 1
          time: "00:01:00"
          signal_lead: 5
        """,
    )
    # A requeued job waits out Slurm's restart delay (about two minutes) before it runs.
    result = cli_inproc("run", str(path), "--json")
    job = result.json()
    logs = cli_inproc("logs", job["id"]).out
    assert (result.rc, job["state"]) == (0, "SUCCEEDED"), logs
    # Lightning's handler ran: it saved an HPC checkpoint and requeued the job ...
    assert "USR1 5s before the time limit" in logs and "requeing job" in logs.lower(), logs
    assert list(ckpt.glob("hpc_ckpt_*.ckpt")), logs
    # ... and the next run (attempt 2, by SLURM_RESTART_COUNT) started from it.
    starts = re.findall(r"attempt=(\d+) restart=(\d+) hpc_checkpoints=(\[.*\])", logs)
    assert starts[0] == ("1", "0", "[]") and len(starts) >= 2, logs
    assert starts[1][0] == "2" and "hpc_ckpt_1.ckpt" in starts[1][2], logs
    assert "trained to epoch 10" in logs, logs
