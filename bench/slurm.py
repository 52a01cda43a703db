"""Slurm (devstack cluster): submitting 100 splits, and the scheduler calls of one status poll.

What users do instead: a launcher without arrays (TAO SDK, NeMo-Run, submitit without
`batch()`) runs one sbatch per job and one squeue/sacct per job on every poll. Both are
timed here on the same cluster, interleaved with anylaunch. Every job is submitted held
(`--hold`), so nothing takes the cluster's CPUs, and every job this module submitted is
cancelled by id at the end.

Calls are counted by `anylaunch.backends.slurm.commands.CALLS`, through which anylaunch
runs every Slurm tool.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

from anylaunch.backends.slurm import commands, parse
from anylaunch.jobfile import loader
from anylaunch.launch import splits
from anylaunch.launch.resolve import resolve
from anylaunch.observe import watch
from anylaunch.state import State
from anylaunch.store import JobRecord, Store
from bench.common import (
    Row,
    bench_record,
    failed,
    interleaved,
    median_ms,
    ms,
    skipped,
    use_devstack,
)

GROUP_SUBMIT = "submit"
GROUP_POLL = "status poll"
JOB = "name: bench-slurm\ncommand: 'true'\nlauncher: none\nslurm:\n  sbatch_lines: [--hold]\n"
FORGOTTEN = "999999"  # a job slurmctld no longer knows: makes every poll ask sacct too
SIZES = (1, 100, 1000)


def run(rounds: int = 3) -> list[Row]:
    why = use_devstack("SLURM_CONF")
    if why:
        return [
            skipped(GROUP_SUBMIT, "Slurm: 100 splits", "1 sbatch", why),
            *(skipped(GROUP_POLL, f"Slurm: {n:,} jobs", "≤ 2 calls", why) for n in SIZES),
        ]
    home = Path(tempfile.mkdtemp(prefix="bench-slurm-"))
    store = Store(home)
    spec = loader.from_text(JOB, file=str(home / "job.yaml"))
    natives: list[str] = []  # every Slurm job submitted here, cancelled at the end
    rows: list[Row] = []
    try:
        try:
            rows.append(_submit(spec, store, natives, rounds))
        except Exception as exc:
            rows.append(failed(GROUP_SUBMIT, "Slurm: 100 splits", "1 sbatch", exc))
        try:
            rows += _poll(spec, store, natives, rounds)
        except Exception as exc:
            rows.append(failed(GROUP_POLL, "Slurm", "≤ 2 calls", exc))
        try:
            rows.append(_silent_controller(home))
        except Exception as exc:
            rows.append(failed(GROUP_POLL, SILENT, "≤ 3 s", exc))
    finally:
        for start in range(0, len(natives), 500):
            commands.run(["scancel", *natives[start : start + 500]], check=False)
        store.close()
        shutil.rmtree(home, ignore_errors=True)  # held jobs, cancelled: nothing writes here
    return rows


def _sbatch_one() -> str:
    proc = subprocess.run(
        ["sbatch", "--parsable", "--hold", "--job-name", "bench-plain", "--output", "/dev/null",
         "--wrap", "true"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return parse.job_id(proc.stdout)


def _submit(spec: object, store: Store, natives: list[str], rounds: int) -> Row:
    """100 splits as one array vs 100 plain sbatch calls."""
    sbatches: list[int] = []

    def ours() -> None:
        before = commands.CALLS["sbatch"]
        run_ = splits.launch(resolve(spec, "slurm"), 100, store=store)
        sbatches.append(commands.CALLS["sbatch"] - before)
        natives.append(run_.jobs[0].record.meta["array_job_id"])

    def plain() -> None:
        natives.extend(_sbatch_one() for _ in range(100))

    samples = interleaved({"ours": ours, "plain": plain}, rounds, warmup=0)
    a, b = median_ms(samples["ours"]), median_ms(samples["plain"])
    calls = max(sbatches)
    return Row(
        GROUP_SUBMIT,
        "Slurm: 100 splits (held)",
        ours=f"{calls} sbatch, {ms(a)}",
        other=f"100 sbatch, {ms(b)}",
        goal="1 sbatch",
        met=calls == 1,
        note=f"{b / a:.1f}× faster than one sbatch per split; median of {rounds}",
        data={"sbatch_calls": sbatches, "ours_ms": a, "plain_ms": b},
    )


def _poll(spec: object, store: Store, natives: list[str], rounds: int) -> list[Row]:
    """Tracked sets of 1, 100 and 1,000 held array tasks, plus one forgotten job each."""
    big = splits.launch(resolve(spec, "slurm"), 1000, store=store)
    natives.append(big.jobs[0].record.meta["array_job_id"])
    records = [job.record for job in big.jobs]
    rows = []
    for size in SIZES:
        tracked = [*records[: size - 1], _forgotten(store)] if size > 1 else records[:1]
        counted: list[Counter[str]] = []

        def ours(tracked: list[JobRecord] = tracked, counted: list[Counter[str]] = counted) -> None:
            before = commands.CALLS.copy()
            watch.refresh(tracked, store)
            counted.append(commands.CALLS - before)

        ids = [r.native_id or "" for r in tracked]

        def per_job(ids: list[str] = ids) -> None:  # what a launcher without batching does
            for native in ids:
                subprocess.run(["squeue", "--noheader", "--jobs", native], capture_output=True)

        start = time.perf_counter()
        ours()  # the first poll also records each job's first observation in the store
        first = (time.perf_counter() - start) * 1000
        contenders = {"ours": ours, "per_job": per_job}
        samples = interleaved(contenders, rounds if size <= 100 else 1, warmup=0)
        calls = max(counted, key=lambda c: sum(c.values()))
        total = sum(calls.values())
        a, b = median_ms(samples["ours"]), median_ms(samples["per_job"])
        rows.append(
            Row(
                GROUP_POLL,
                f"Slurm: {size:,} tracked jobs",
                ours=f"{total} calls ({_calls(calls)}), {ms(a)}",
                other=f"{size:,} squeue, {ms(b)}",
                goal="≤ 2 calls",
                met=total <= 2,
                note=(
                    "held array tasks"
                    + (" + 1 job slurmctld forgot (needs sacct)" if size > 1 else "")
                    + f"; first poll {ms(first)} (it stores every job's first observation)"
                ),
                data={"calls": dict(calls), "ours_ms": a, "per_job_ms": b, "first_ms": first},
            )
        )
    return rows


SILENT = "Slurm controller not answering: ps / status"


def _silent_controller(home: Path, rounds: int = 2) -> Row:
    """`ps` and `status` of a live Slurm job while slurmctld does not answer, against a
    bare squeue that asks the same silent controller (it retries for ~18 s by itself).

    The controller is a copy of the devstack's slurm.conf whose ports nobody listens on:
    stopping the shared slurmctld would disturb everyone else on the devstack.
    """
    import os
    import re
    import socket
    import sys

    def closed_port() -> int:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]

    text = Path(os.environ["SLURM_CONF"]).read_text()
    text = re.sub(r"(?m)^SlurmctldPort=.*$", f"SlurmctldPort={closed_port()}", text)
    text = re.sub(r"(?m)^AccountingStoragePort=.*$", f"AccountingStoragePort={closed_port()}", text)
    silent = home / "silent"
    silent.mkdir()
    (silent / "slurm.conf").write_text(text)
    store = Store(silent)
    job = _forgotten(store)
    # A job recorded but never given a Slurm id (its submitter died): every poll looks
    # for it by its comment, one more squeue the silent controller does not answer.
    store.add(bench_record(store, "slurm", "bench-orphan", State.PENDING))
    store.close()
    env = {**os.environ, "SLURM_CONF": str(silent / "slurm.conf"), "ANYLAUNCH_HOME": str(silent)}
    cli = [sys.executable, "-m", "anylaunch"]

    def timed(argv: list[str]) -> None:
        subprocess.run(argv, env=env, capture_output=True, check=False, timeout=120)

    samples = interleaved(
        {
            "ps": lambda: timed([*cli, "ps"]),
            "status": lambda: timed([*cli, "status", job.id]),
            "squeue": lambda: timed(["squeue", "--noheader", "--jobs", FORGOTTEN]),
        },
        rounds,
    )
    shown = subprocess.run([*cli, "ps"], env=env, capture_output=True, text=True, timeout=120)
    stale = "(stale)" in shown.stdout and "unreachable since" in shown.stderr
    listed = subprocess.run(
        [*cli, "ps", "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    rows = {r["id"]: r for r in json.loads(listed.stdout or "[]")}
    stale = stale and "unreachable since" in (rows.get(job.id, {}).get("stale") or "")
    ps, status, squeue = (median_ms(samples[k]) for k in ("ps", "status", "squeue"))
    worst = max(ps, status)
    return Row(
        GROUP_POLL,
        SILENT,
        ours=f"{ms(ps)} / {ms(status)}",
        other=f"bare squeue {ms(squeue)}",
        goal="≤ 3 s; last known states marked stale",
        met=worst <= 3000 and stale,
        note=f"{squeue / worst:.1f}× faster than squeue's own retries; rows shown stale"
        f" (table and --json): {'yes' if stale else 'no'}; the store also holds a job never"
        f" given a Slurm id, looked for by comment; median of {rounds}, interleaved",
        data={"ps_ms": ps, "status_ms": status, "squeue_ms": squeue, "stale": stale},
    )


def _forgotten(store: Store) -> JobRecord:
    return store.add(bench_record(store, "slurm", "bench-forgotten", State.RUNNING, FORGOTTEN))


def _calls(calls: Counter[str]) -> str:
    return " + ".join(f"{n} {tool}" for tool, n in sorted(calls.items()))
