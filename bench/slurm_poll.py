"""Cost of `anylaunch ps` over many tracked Slurm jobs: Slurm calls per poll, and time.

Needs the devstack cluster (`scripts/devstack up`). Submits N held jobs (pending, no CPU),
tracks one job slurmctld has forgotten (so sacct is exercised), polls them all through
the public API, prints the calls per tool, then cancels the jobs.

    python -m bench.slurm_poll [--jobs 50]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from anylaunch import api, config
from anylaunch.backends.slurm import commands
from anylaunch.state import State
from anylaunch.store import JobRecord, Store

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.slurm_poll")
    parser.add_argument("--jobs", type=int, default=50)
    args = parser.parse_args()
    env_file = ROOT / ".devstack" / "slurm.env"
    if "SLURM_CONF" not in os.environ and env_file.exists():
        for line in env_file.read_text().splitlines():
            if line.startswith("export SLURM_CONF="):
                os.environ["SLURM_CONF"] = line.split("=", 1)[1]
    home = Path(tempfile.mkdtemp(prefix="bench-slurm-"))
    store = Store(home)
    spec = config.from_text(
        "command: 'true'\nlauncher: none\nslurm:\n  sbatch_lines: [--hold]\n",
        file=str(home / "job.yaml"),
    )
    started = time.perf_counter()
    jobs = [api.submit(spec, "slurm", store=store) for _ in range(args.jobs - 1)]
    submit_s = time.perf_counter() - started
    store.add(
        JobRecord(
            id="forgotten",
            name="old",
            backend="slurm",
            state=State.RUNNING,
            job_dir=str(home / "old"),
            native_id="999999",
        )
    )
    try:
        before = commands.CALLS.copy()
        started = time.perf_counter()
        records = api.jobs(store=store, limit=None)
        poll_ms = (time.perf_counter() - started) * 1000
        calls = dict(commands.CALLS - before)
    finally:
        commands.run(["scancel", *(job.record.native_id for job in jobs)])
    result = {
        "tracked_jobs": len(records),
        "slurm_calls_per_poll": calls,
        "poll_ms": round(poll_ms, 1),
        "submit_ms_per_job": round(submit_s * 1000 / max(len(jobs), 1), 1),
    }
    print(json.dumps(result, indent=2))
    ok = calls.get("squeue") == 1 and calls.get("sacct", 0) <= 1 and len(calls) <= 2
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
