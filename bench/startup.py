"""CLI start-up: `anylaunch --help` and `anylaunch ps` (100,000 stored jobs) vs bare Python,
and the CLIs users would otherwise reach for (`torchx --help`, `sky --help`, `import
submitit`) from their own venv (bench/others.py).

Commands are run interleaved, round-robin, so machine noise hits all of them alike; the
ratio of medians is what we compare against the goal.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from anylaunch.state import State
from anylaunch.store import JobRecord, Store
from bench import others
from bench.common import Row, interleaved, median_ms, ms, skipped

GROUP = "CLI start-up"


def fill_store(root: Path, count: int) -> None:
    """A store holding `count` finished jobs, written in batches."""
    store = Store(root)
    have = store.count()
    batch = []
    for i in range(have, count):
        batch.append(
            JobRecord(
                # Numbered, not random: a million random 8-character ids collide about
                # one time in three (the birthday bound).
                id=f"{i:08d}",
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


# The dry-run of a 2-node x 8-GPU job: no cluster is touched, so this is start-up, the
# job file's validation and the plan's rendering.
_DRY = "name: bench\ncommand: python train.py --lr 0.1\nnodes: 2\ngpus_per_node: 8\n"
_IMAGE = "image: nvcr.io/nvidia/pytorch:25.08-py3\n"
DRY_RUN_JOBS = {
    "local": _DRY + "launcher: torchrun\n",
    "slurm": _DRY + _IMAGE + "slurm: {partition: gpu, time: '01:00:00'}\n",
    "lepton": _DRY + _IMAGE + "lepton: {resource_shape: gpu.8xh100-sxm}\n",
}


def run(rounds: int = 15, jobs: int = 100_000) -> list[Row]:
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
            # The floor of any command that reads a job file: pydantic itself, then with
            # the job file's models (JobSpec), which a dry-run cannot do without. (This
            # import also scans for pydantic plugins, which the CLI skips.)
            "import pydantic": [python, "-c", "import pydantic.main"],
            "import pydantic + job file models": [python, "-c", "import anylaunch.spec"],
            "anylaunch --help": [*base, "--help"],
            f"anylaunch ps ({jobs:,} jobs)": [*base, "ps"],
        }
        for backend, text in DRY_RUN_JOBS.items():
            path = home / f"dry-{backend}.yaml"
            path.write_text(text)
            commands[f"anylaunch run --dry-run ({backend}, 2x8)"] = [
                *base, "run", str(path), "--backend", backend, "--dry-run",
            ]  # fmt: skip
        missing = []
        for name, argv in others.commands().items():
            if argv is None:
                missing.append(name)
            else:
                commands[name] = argv
        samples = interleaved(
            {name: lambda argv=argv: _run(argv, env) for name, argv in commands.items()}, rounds
        )
        medians = {name: median_ms(values) for name, values in samples.items()}
    finally:
        shutil.rmtree(home, ignore_errors=True)

    bare = medians["python -c pass"]
    floor = medians["import pydantic + job file models"]
    pydantic_alone = medians["import pydantic"]
    goals = {"anylaunch --help": 10.0, f"anylaunch ps ({jobs:,} jobs)": 10.0}
    goals.update({f"anylaunch run --dry-run ({b}, 2x8)": 10.0 for b in DRY_RUN_JOBS})
    rows = []
    for name, value in medians.items():
        goal = goals.get(name)
        rows.append(
            Row(
                GROUP,
                name,
                ours=f"{ms(value)} = {value / bare:.1f}× python"
                if name.startswith("anylaunch")
                else "",
                other=""
                if name.startswith("anylaunch")
                else f"{ms(value)} = {value / bare:.1f}× python",
                goal=f"≤ {goal:g}× python" if goal else "",
                met=None if goal is None else value / bare <= goal,
                note=f"median of {rounds}, interleaved"
                + (
                    f"; misses: importing pydantic alone is {pydantic_alone / bare:.1f}× python,"
                    f" with the job file's models {floor / bare:.1f}×, leaving"
                    f" {value - floor:.0f} ms for the rest"
                    if goal is not None and value / bare > goal and "dry-run" in name
                    else ""
                ),
                data={"median_ms": value, "ratio_to_python": value / bare},
            )
        )
    rows += [
        skipped(GROUP, name, "", "not installed (python -m bench --setup)") for name in missing
    ]
    return [*rows, skypilot_dry_run()]


SKY_JOB = _DRY + "skypilot: {cloud: aws, accelerators: 'H100:8', use_spot: true}\n"


def skypilot_dry_run(rounds: int = 5) -> Row:
    """A SkyPilot dry-run hands the task to the real library, so it imports SkyPilot
    (seconds): the goal is that it costs no more than that import does."""
    case = "anylaunch run --dry-run (skypilot, 2x8)"
    goal = "≤ 1.0× python -c 'import sky'"
    if importlib.util.find_spec("sky") is None:
        return skipped(GROUP, case, goal, "SkyPilot not installed (pip install '.[skypilot]')")
    python = sys.executable
    home = Path(tempfile.mkdtemp(prefix="anylaunch-bench-sky-"))
    try:
        path = home / "sky.yaml"
        path.write_text(SKY_JOB)
        env = {**os.environ, "ANYLAUNCH_HOME": str(home), "HOME": str(home),
               "SKYPILOT_DISABLE_USAGE_COLLECTION": "1"}  # fmt: skip
        commands = {
            "import sky": [python, "-c", "import sky"],
            "dry-run": [python, "-m", "anylaunch", "run", str(path), "--dry-run"],
        }
        samples = interleaved(
            {name: lambda argv=argv: _run(argv, env) for name, argv in commands.items()}, rounds
        )
    finally:
        shutil.rmtree(home, ignore_errors=True)
    sky, ours = median_ms(samples["import sky"]), median_ms(samples["dry-run"])
    return Row(
        GROUP,
        case,
        ours=f"{ms(ours)} = {ours / sky:.2f}× import sky",
        other=f"python -c 'import sky' {ms(sky)}",
        goal=goal,
        met=ours <= sky,
        note=f"median of {rounds}, interleaved; the dry-run validates the task with the library",
        data={"median_ms": ours, "import_sky_ms": sky, "ratio": ours / sky},
    )


def _run(argv: list[str], env: dict[str, str]) -> None:
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
