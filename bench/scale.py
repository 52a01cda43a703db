"""Scale past one workstation, by simulation: a store of up to 1,000,000 jobs.

The store grows 10,000 -> 100,000 -> 1,000,000 finished jobs (written in batches, as
bench/startup.py does), and at each size `anylaunch ps`, `anylaunch status` of one job
and the dashboard's first
page (a real `anylaunch ui`, over loopback HTTP) are timed, interleaved with bare
Python, so the rows show how each cost grows with the store. The goal is that none of
them grows with the store: ps and status stay within 10x bare Python, the first page
within 300 ms, at 1,000,000 jobs.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from anylaunch.store import Store
from bench.common import Row, failed, interleaved, median_ms, ms, start_ui
from bench.startup import fill_store

GROUP = "scale: store"
SIZES = (10_000, 100_000, 1_000_000)
RATIO_GOAL = 10.0
PAGE_GOAL_MS = 300.0


def run(rounds: int = 5, sizes: tuple[int, ...] = SIZES) -> list[Row]:
    home = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    rows: list[Row] = []
    try:
        for size in sizes:
            try:
                rows += _at(home, size, rounds)
            except Exception as exc:
                rows.append(failed(GROUP, f"{size:,} jobs", "", exc))
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return rows


def _at(home: Path, size: int, rounds: int) -> list[Row]:
    fill_store(home, size)
    store = Store(home)
    job_id = store.list(limit=1)[0].id  # by id: the primary key, wherever the job sits
    store.close()
    env = {**os.environ, "ANYLAUNCH_HOME": str(home)}
    python = sys.executable
    base = [python, "-m", "anylaunch"]
    commands = {
        "python": [python, "-c", "pass"],
        "ps": [*base, "ps"],
        "status": [*base, "status", job_id],
    }
    calls = {name: (lambda argv=argv: _quiet(argv, env)) for name, argv in commands.items()}
    server = url = None
    if importlib.util.find_spec("uvicorn") is not None:
        server, url = start_ui(env)
    try:
        if url is not None:
            import httpx

            client = httpx.Client(timeout=60)
            calls["page"] = lambda: client.get(url).raise_for_status()
        samples = interleaved(calls, rounds)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=10)
    medians = {name: median_ms(values) for name, values in samples.items()}
    bare = medians["python"]
    rows = []
    for name, label in (("ps", "anylaunch ps"), ("status", "anylaunch status (one job)")):
        value = medians[name]
        rows.append(
            Row(
                GROUP,
                f"{label}, {size:,} jobs",
                ours=f"{ms(value)} = {value / bare:.1f}× python",
                other=f"python {ms(bare)}",
                goal=f"≤ {RATIO_GOAL:g}× python",
                met=value / bare <= RATIO_GOAL,
                note=f"median of {rounds}, interleaved",
                data={"size": size, "ms": value, "python_ms": bare, "ratio": value / bare},
            )
        )
    if "page" in medians:
        value = medians["page"]
        rows.append(
            Row(
                GROUP,
                f"dashboard first page, {size:,} jobs",
                ours=ms(value),
                goal=f"≤ {PAGE_GOAL_MS:g} ms",
                met=value <= PAGE_GOAL_MS,
                note=f"HTTP GET of a running `anylaunch ui`, median of {rounds}, interleaved",
                data={"size": size, "ms": value},
            )
        )
    return rows


def _quiet(argv: list[str], env: dict[str, str]) -> None:
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
