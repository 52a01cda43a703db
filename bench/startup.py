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


TORCHX_DRY_RUN = "torchx run --dryrun (slurm, 2x8)"


def run(rounds: int = 15, jobs: int = 100_000) -> list[Row]:
    python = sys.executable
    base = command()
    home = Path(tempfile.mkdtemp(prefix="anylaunch-bench-"))
    try:
        fill_store(home, jobs)
        env = {**os.environ, "ANYLAUNCH_HOME": str(home)}
        commands: dict[str, tuple[list[str], dict[str, str]]] = {
            "python -c pass": ([python, "-c", "pass"], env),
            # The floor of any command that reads a job file: pydantic itself, then with
            # the job file's models (JobSpec).
            "import pydantic": ([python, "-c", "import pydantic.main"], env),
            "import pydantic + job file models": (
                [python, "-c", "import anylaunch.jobfile.spec"],
                env,
            ),
            "anylaunch --help": ([*base, "--help"], env),
            f"anylaunch ps ({jobs:,} jobs)": ([*base, "ps"], env),
        }
        for backend, text in DRY_RUN_JOBS.items():
            path = home / f"dry-{backend}.yaml"
            path.write_text(text)
            argv = [*base, "run", str(path), "--backend", backend, "--dry-run"]
            commands[f"anylaunch run --dry-run ({backend}, 2x8)"] = (argv, env)
        missing = []
        for name, other in others.commands().items():
            if other is None:
                missing.append(name)
            else:
                commands[name] = (other, env)
        samples = interleaved({name: lambda c=c: _run(*c) for name, c in commands.items()}, rounds)
        medians = {name: median_ms(values) for name, values in samples.items()}
    finally:
        shutil.rmtree(home, ignore_errors=True)

    bare = medians["python -c pass"]
    floor = medians["import pydantic + job file models"]
    torchx = medians.get(TORCHX_DRY_RUN)
    goals = {"anylaunch --help": 10.0, f"anylaunch ps ({jobs:,} jobs)": 10.0}
    rows = []
    for name, value in medians.items():
        goal, met = goals.get(name), None
        note = f"median of {rounds}, interleaved"
        shown = f"{ms(value)} = {value / bare:.1f}× python"
        goal_text = f"≤ {goal:g}× python" if goal else ""
        if goal is not None:
            met = value / bare <= goal
        if name.startswith("anylaunch run --dry-run"):
            note += (
                f"; in a process of its own: pydantic and the job file's models cost"
                f" {floor / bare:.1f}× python, {value - floor:.0f} ms for the rest"
            )
            goal_text = "≤ TorchX's dry-run of the same job"
            if torchx is not None:
                met = value <= torchx
                shown += f" = {value / torchx:.2f}× torchx"
            else:
                note += "; TorchX not installed (python -m bench --setup): goal not measured"
        if met is False:
            note += f"; misses the goal (load average {os.getloadavg()[0]:.1f})"
        ours = name.startswith("anylaunch")
        rows.append(
            Row(
                GROUP,
                name,
                ours=shown if ours else "",
                other="" if ours else shown,
                goal=goal_text,
                met=met,
                note=note,
                data={"median_ms": value, "ratio_to_python": value / bare},
            )
        )
    rows += [
        skipped(GROUP, name, "", "not installed (python -m bench --setup)") for name in missing
    ]
    return [*rows, *skypilot_dry_run()]


def command() -> list[str]:
    """The installed `anylaunch` command, as users run it (`python -m anylaunch` if the
    venv has none)."""
    bindir = Path(sys.executable).parent
    if (bindir / "anylaunch").exists():
        return [str(bindir / "anylaunch")]
    return [sys.executable, "-m", "anylaunch"]


SKY_JOB = _DRY + "skypilot: {cloud: aws, accelerators: 'H100:8', use_spot: true}\n"


def skypilot_dry_run(rounds: int = 5) -> list[Row]:
    """A SkyPilot dry-run hands the task to the real library, so it imports SkyPilot
    (seconds): that import is its floor, shown beside it."""
    case = "anylaunch run --dry-run (skypilot, 2x8)"
    goal = ""
    if importlib.util.find_spec("sky") is None:
        return [skipped(GROUP, case, goal, "SkyPilot not installed (pip install '.[skypilot]')")]
    python = sys.executable
    home = Path(tempfile.mkdtemp(prefix="anylaunch-bench-sky-"))
    try:
        path = home / "sky.yaml"
        path.write_text(SKY_JOB)
        env = {**os.environ, "ANYLAUNCH_HOME": str(home), "HOME": str(home),
               "SKYPILOT_DISABLE_USAGE_COLLECTION": "1"}  # fmt: skip
        commands = {
            "import sky": ([python, "-c", "import sky"], env),
            "dry-run": ([*command(), "run", str(path), "--dry-run"], env),
        }
        samples = interleaved({name: lambda c=c: _run(*c) for name, c in commands.items()}, rounds)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    sky, ours = median_ms(samples["import sky"]), median_ms(samples["dry-run"])
    return [
        Row(
            GROUP,
            case,
            ours=f"{ms(ours)} = {ours / sky:.2f}× import sky",
            other=f"python -c 'import sky' {ms(sky)}",
            goal=goal,
            met=None,
            note=f"median of {rounds}, interleaved; the dry-run validates the task with the"
            " library, in a process of its own",
            data={"median_ms": ours, "import_sky_ms": sky, "ratio": ours / sky},
        )
    ]


def _run(argv: list[str], env: dict[str, str]) -> None:
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
