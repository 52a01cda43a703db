"""CLI start-up: `anylaunch --help` and `anylaunch ps` (100,000 stored jobs) vs bare Python,
and the CLIs users would otherwise reach for (`torchx --help`, `sky --help`, `import
submitit`) from their own venv (bench/others.py).

Commands are run interleaved, round-robin, so machine noise hits all of them alike; the
ratio of medians is what we compare against the goal.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
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
    base = command()
    home = Path(tempfile.mkdtemp(prefix="anylaunch-bench-"))
    try:
        fill_store(home, jobs)
        env = {**os.environ, "ANYLAUNCH_HOME": str(home), "ANYLAUNCH_WARM": "0"}
        warm_env = warm_environment(env, home)
        commands: dict[str, tuple[list[str], dict[str, str]]] = {
            "python -c pass": ([python, "-c", "pass"], env),
            # The floor of any command that reads a job file in a process of its own:
            # pydantic itself, then with the job file's models (JobSpec). (This import
            # also scans for pydantic plugins, which the CLI skips.)
            "import pydantic": ([python, "-c", "import pydantic.main"], env),
            "import pydantic + job file models": ([python, "-c", "import anylaunch.spec"], env),
            "anylaunch --help": ([*base, "--help"], env),
            f"anylaunch ps ({jobs:,} jobs)": ([*base, "ps"], env),
        }
        for backend, text in DRY_RUN_JOBS.items():
            path = home / f"dry-{backend}.yaml"
            path.write_text(text)
            argv = [*base, "run", str(path), "--backend", backend, "--dry-run"]
            commands[f"anylaunch run --dry-run ({backend}, 2x8)"] = (argv, warm_env)
            commands[f"anylaunch run --dry-run ({backend}, 2x8), {COLD}"] = (argv, env)
        missing = []
        for name, other in others.commands().items():
            if other is None:
                missing.append(name)
            else:
                commands[name] = (other, env)
        with warm_server(base, home / "dry-local.yaml", warm_env):
            samples = interleaved(
                {name: lambda c=c: _run(*c) for name, c in commands.items()}, rounds
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
        note = f"median of {rounds}, interleaved"
        if name.startswith("anylaunch run --dry-run") and not name.endswith(COLD):
            note += "; a warm server running, as after the first dry-run (ANYLAUNCH_WARM)"
        elif name.endswith(COLD):
            note += (
                f"; a process of its own pays for pydantic ({pydantic_alone / bare:.1f}× python)"
                f" and the job file's models ({floor / bare:.1f}× with pydantic),"
                f" {value - floor:.0f} ms for the rest (ANYLAUNCH_WARM=0; a user's first"
                " dry-run costs this, then starts the server)"
            )
        if goal is not None and value / bare > goal:
            note += f"; misses the goal (load average {os.getloadavg()[0]:.1f})"
        ours = name.startswith("anylaunch")
        shown = f"{ms(value)} = {value / bare:.1f}× python"
        rows.append(
            Row(
                GROUP,
                name,
                ours=shown if ours else "",
                other="" if ours else shown,
                goal=f"≤ {goal:g}× python" if goal else "",
                met=None if goal is None else value / bare <= goal,
                note=note,
                data={"median_ms": value, "ratio_to_python": value / bare},
            )
        )
    rows += [
        skipped(GROUP, name, "", "not installed (python -m bench --setup)") for name in missing
    ]
    return [*rows, *skypilot_dry_run()]


COLD = "first: no warm server"


def command() -> list[str]:
    """The installed `anylaunch` command, as users run it (`python -m anylaunch` if the
    venv has none)."""
    bindir = Path(sys.executable).parent
    if (bindir / "anylaunch").exists():
        return [str(bindir / "anylaunch")]
    return [sys.executable, "-m", "anylaunch"]


def warm_environment(env: dict[str, str], home: Path) -> dict[str, str]:
    """`env` with warm start on, its servers in a folder of this bench's own."""
    (home / "run").mkdir(exist_ok=True)
    return {**env, "ANYLAUNCH_WARM": "1", "XDG_RUNTIME_DIR": str(home / "run")}


@contextmanager
def warm_server(base: list[str], job: Path, env: dict[str, str]) -> Iterator[None]:
    """A warm server for `env`, as the first dry-run of a user leaves one; stopped after."""
    subprocess.run([*base, "run", str(job), "--dry-run"], env=env, capture_output=True)
    folder = Path(env["XDG_RUNTIME_DIR"]) / f"anylaunch-warm-{os.getuid()}"
    deadline = time.monotonic() + 60
    while not list(folder.glob("*.sock")):
        if time.monotonic() > deadline:
            logs = " ".join(path.read_text() for path in folder.glob("*.log"))
            raise RuntimeError(f"no warm server started in {folder}: {logs}")
        time.sleep(0.05)
    try:
        yield
    finally:
        for lock in folder.glob("*.lock"):
            with contextlib.suppress(ValueError, OSError):
                os.kill(int(lock.read_text()), signal.SIGTERM)


SKY_JOB = _DRY + "skypilot: {cloud: aws, accelerators: 'H100:8', use_spot: true}\n"


def skypilot_dry_run(rounds: int = 5) -> list[Row]:
    """A SkyPilot dry-run hands the task to the real library, so it imports SkyPilot
    (seconds): the goal is that it costs no more than that import does."""
    case = "anylaunch run --dry-run (skypilot, 2x8)"
    goal = "≤ 1.0× python -c 'import sky'"
    if importlib.util.find_spec("sky") is None:
        return [skipped(GROUP, case, goal, "SkyPilot not installed (pip install '.[skypilot]')")]
    python = sys.executable
    home = Path(tempfile.mkdtemp(prefix="anylaunch-bench-sky-"))
    try:
        path = home / "sky.yaml"
        path.write_text(SKY_JOB)
        env = {**os.environ, "ANYLAUNCH_HOME": str(home), "HOME": str(home),
               "SKYPILOT_DISABLE_USAGE_COLLECTION": "1", "ANYLAUNCH_WARM": "0"}  # fmt: skip
        warm_env = warm_environment(env, home)
        dry_run = [*command(), "run", str(path), "--dry-run"]
        commands = {
            "import sky": ([python, "-c", "import sky"], env),
            "dry-run": (dry_run, warm_env),
            "cold": (dry_run, env),
        }
        with warm_server(command(), path, warm_env):
            samples = interleaved(
                {name: lambda c=c: _run(*c) for name, c in commands.items()}, rounds
            )
    finally:
        shutil.rmtree(home, ignore_errors=True)
    sky = median_ms(samples["import sky"])
    ours, cold = median_ms(samples["dry-run"]), median_ms(samples["cold"])
    note = f"median of {rounds}, interleaved; the dry-run validates the task with the library"
    return [
        Row(
            GROUP,
            case,
            ours=f"{ms(ours)} = {ours / sky:.2f}× import sky",
            other=f"python -c 'import sky' {ms(sky)}",
            goal=goal,
            met=ours <= sky,
            note=note + "; a warm server running, which imports SkyPilot in each worker",
            data={"median_ms": ours, "import_sky_ms": sky, "ratio": ours / sky},
        ),
        Row(
            GROUP,
            f"{case}, {COLD}",
            ours=f"{ms(cold)} = {cold / sky:.2f}× import sky",
            other=f"python -c 'import sky' {ms(sky)}",
            note=note + "; in a process of its own",
            data={"median_ms": cold, "import_sky_ms": sky, "ratio": cold / sky},
        ),
    ]


def _run(argv: list[str], env: dict[str, str]) -> None:
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
