"""CLI start-up: `anylaunch --help` and `anylaunch ps` (100,000 stored jobs) vs bare Python.

Commands are run interleaved, round-robin, so machine noise hits all of them alike; the
ratio of medians is what we compare against the goal.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from anylaunch.state import State
from anylaunch.store import JobRecord, Store, new_id


def fill_store(root: Path, count: int) -> None:
    """A store holding `count` finished jobs, written in batches."""
    store = Store(root)
    have = store.count()
    batch = []
    for i in range(have, count):
        batch.append(
            JobRecord(
                id=new_id(),
                name=f"job-{i}",
                backend="local",
                state=State.SUCCEEDED if i % 7 else State.FAILED,
                job_dir=str(root / "jobs" / str(i)),
                exit_code=0 if i % 7 else 1,
            )
        )
        if len(batch) == 10_000:
            store.add_many(batch)
            batch = []
    if batch:
        store.add_many(batch)
    store.close()


def _time(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def measure(commands: dict[str, list[str]], env: dict[str, str], rounds: int) -> dict[str, float]:
    for argv in commands.values():  # warm the page cache and .pyc files
        _time(argv, env)
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(rounds):
        for name, argv in commands.items():
            samples[name].append(_time(argv, env))
    return {name: statistics.median(values) * 1000 for name, values in samples.items()}


def run(rounds: int = 15, jobs: int = 100_000) -> list[dict]:
    python = sys.executable
    bindir = Path(python).parent
    anylaunch = str(bindir / "anylaunch") if (bindir / "anylaunch").exists() else None
    base = [anylaunch] if anylaunch else [python, "-m", "anylaunch"]
    home = Path(tempfile.mkdtemp(prefix="anylaunch-bench-"))
    try:
        fill_store(home, jobs)
        env = {**os.environ, "ANYLAUNCH_HOME": str(home)}
        commands = {
            "python -c pass": [python, "-c", "pass"],
            "anylaunch --help": [*base, "--help"],
            f"anylaunch ps ({jobs:,} jobs)": [*base, "ps"],
        }
        others = {
            "torchx --help": shutil.which("torchx", path=str(bindir)),
            "sky --help": shutil.which("sky", path=str(bindir)),
        }
        for name, exe in others.items():
            if exe:
                commands[name] = [exe, "--help"]
        skipped = [name for name, exe in others.items() if not exe]
        try:
            __import__("submitit")
            commands["import submitit"] = [python, "-c", "import submitit"]
        except ImportError:
            skipped.append("import submitit")
        medians = measure(commands, env, rounds)
    finally:
        shutil.rmtree(home, ignore_errors=True)

    bare = medians["python -c pass"]
    goals = {"anylaunch --help": 10.0, f"anylaunch ps ({jobs:,} jobs)": 10.0}
    rows = []
    for name, ms in medians.items():
        ratio = ms / bare
        goal = goals.get(name)
        rows.append(
            {
                "benchmark": "startup",
                "case": name,
                "median_ms": round(ms, 1),
                "ratio_to_python": round(ratio, 1),
                "goal": f"≤ {goal:g}× python" if goal else "",
                "met": None if goal is None else ratio <= goal,
            }
        )
    for name in skipped:
        rows.append(
            {
                "benchmark": "startup",
                "case": name,
                "median_ms": None,
                "ratio_to_python": None,
                "goal": "",
                "met": None,
                "note": "skipped: not installed",
            }
        )
    return rows
