"""A Slurm array of up to 10,000 tasks, simulated: its script, one poll, a retry of 100.

The devstack cluster's MaxArraySize (1,001 by default) refuses a 10,000-task array, and
holding 10,000 tasks would swamp slurmctld on this machine, so the cluster is not used:

- the array is rendered as a submit renders it (`splits.render`: every task's record,
  spec and plan as stored, and the one array script), without sbatch;
- a poll runs the backend's real `poll` through `commands.squeue`, with a `squeue` on
  PATH that prints a recorded-shape answer for every task (`JobID|ArrayJobID|
  ArrayTaskID|State|exit_code|Reason|`, as the real one prints for `--Format`), so the
  real parser reads 10,000 rows; every task is known, so no sacct is asked;
- a retry of 100 failed tasks renders the array for those 100 splits.

What this does not show: slurmctld's own time to answer squeue for 10,000 tasks.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from anylaunch.backends.base import get_backend
from anylaunch.backends.slurm import commands
from anylaunch.jobfile import loader
from anylaunch.launch import splits
from anylaunch.launch.resolve import resolve
from anylaunch.state import State
from anylaunch.store import Store, new_id
from bench.common import Row, bench_record, failed, median_ms, ms

GROUP = "scale: Slurm array"
SIZES = (100, 1_000, 10_000)
JOB = "name: bench-array\ncommand: python train.py\nlauncher: none\nsplits: {n}\nslurm: {{partition: gpu}}\n"
ARRAY_JOB = "4242"
RUN_ID = "benchrun"
GOAL_MS = 1000.0


def run(rounds: int = 3, sizes: tuple[int, ...] = SIZES) -> list[Row]:
    home = Path(tempfile.mkdtemp(prefix="bench-slurm-scale-"))
    saved_path = os.environ.get("PATH", "")
    rows: list[Row] = []
    try:
        tools = home / "bin"
        tools.mkdir()
        answer = home / "squeue.out"
        for name, body in (("squeue", f"cat {answer}\n"), ("sacct", "true\n")):
            (tools / name).write_text(f"#!/bin/sh\n{body}")
            (tools / name).chmod(0o755)
        os.environ["PATH"] = f"{tools}{os.pathsep}{saved_path}"
        for size in sizes:
            try:
                rows.append(_at(home, size, answer, rounds))
            except Exception as exc:
                rows.append(failed(GROUP, f"{size:,} tasks", "", exc))
    finally:
        os.environ["PATH"] = saved_path
        shutil.rmtree(home, ignore_errors=True)
    return rows


def _at(home: Path, size: int, answer: Path, rounds: int) -> Row:
    store = Store(home / f"store-{size}")
    spec = loader.from_text(JOB.format(n=size), file=str(home / "job.yaml"))
    impl = get_backend("slurm")
    ids = [new_id() for _ in range(size)]

    def plan(count: int) -> float:
        start = time.perf_counter()
        batch = splits.render(resolve(spec, impl), store, RUN_ID, list(enumerate(ids[:count])))
        took = time.perf_counter() - start
        assert batch.array and len(batch.records) == count
        return took

    answer.write_text(
        "".join(f"{ARRAY_JOB}_{i}|{ARRAY_JOB}|{i}|PENDING|0|JobHeldUser|\n" for i in range(size))
    )
    records = [
        bench_record(
            store,
            "slurm",
            "bench-array",
            State.PENDING,
            f"{ARRAY_JOB}_{i}",
            job_id=job_id,
            split_id=i,
            meta={"array": True, "array_job_id": ARRAY_JOB, "requeue": True},
        )
        for i, job_id in enumerate(ids)
    ]

    def poll() -> tuple[float, int]:
        before = sum(commands.CALLS.values())
        start = time.perf_counter()
        seen = impl.poll(records)
        took = time.perf_counter() - start
        assert len(seen) == size and all(o.state is State.PENDING for o in seen.values())
        return took, sum(commands.CALLS.values()) - before

    plans, polls, retries, calls = [], [], [], 0
    for _ in range(rounds):  # interleaved: plan, poll, retry, plan, ...
        plans.append(plan(size))
        took, calls = poll()
        polls.append(took)
        retries.append(plan(min(100, size)))
    store.close()
    p, q, r = median_ms(plans), median_ms(polls), median_ms(retries)
    return Row(
        GROUP,
        f"array of {size:,} tasks: script / one poll / retry of {min(100, size)}",
        ours=f"{ms(p)} / {ms(q)} ({calls} call) / {ms(r)}",
        goal=f"1 squeue a poll; each ≤ {GOAL_MS / 1000:g} s",
        met=calls == 1 and max(p, q, r) <= GOAL_MS,
        note="simulated: squeue's answer recorded-shape, parsed by the real code; the"
        " run rendered as a submit does (splits.render: records and the array script; no"
        f" sbatch); median of {rounds}",
        data={"size": size, "plan_ms": p, "poll_ms": q, "retry_ms": r, "calls": calls},
    )
