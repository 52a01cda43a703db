"""Plan rendering, in-process: one job and a 1,000-split run, per backend.

Rendering is what `--dry-run` prints and what every submit does first, so it must stay
far below the cost of the submission itself: a plan in well under a millisecond or two,
a 1,000-split run in under a second. Job files name everything rendering would otherwise
ask the world for (Lepton's shape), so no backend is contacted. A run is rendered by
`splits.render`, the step of `splits.launch` before it records and submits: Slurm's one
array script, one plan per split elsewhere, each job's stored record (spec and plan as
JSON) included.
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from pathlib import Path

from anylaunch import api
from anylaunch.backends.base import ArraySubmission, get_backend
from anylaunch.jobfile import loader
from anylaunch.jobfile.spec import JobSpec
from anylaunch.launch import splits
from anylaunch.launch.resolve import resolve
from anylaunch.store import Store, new_id
from bench.common import Row, failed, interleaved, median_ms, ms, skipped

GROUP = "plan"
BASE = "name: bench\ncommand: python train.py --lr 0.1\nnodes: 2\ngpus_per_node: 8\n"
JOBS = {
    "local": BASE + "local: {master_port: 29500}\n",
    "slurm": BASE
    + "image: nvcr.io/nvidia/pytorch:25.08-py3\nslurm: {partition: gpu, time: '01:00:00'}\n",
    "lepton": BASE
    + "image: nvcr.io/nvidia/pytorch:25.08-py3\nlepton: {resource_shape: gpu.8xh100-sxm}\n",
    "skypilot": BASE + "skypilot: {cloud: aws, accelerators: 'H100:8'}\n",
}
ONE_GOAL_MS = 10.0
RUN_GOAL_MS = 1000.0
SPLITS = 1000
RUN_ROUNDS = 3


def run(rounds: int = 20) -> list[Row]:
    home = Path(tempfile.mkdtemp(prefix="bench-plan-"))
    try:
        return _rows(home, rounds)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _rows(home: Path, rounds: int) -> list[Row]:
    store = Store(home)
    rows = []
    for backend, text in JOBS.items():
        case = f"{backend}: 1 job / {SPLITS:,} splits"
        goal = f"≤ {ONE_GOAL_MS:g} ms / ≤ {RUN_GOAL_MS / 1000:g} s"
        if backend == "skypilot" and importlib.util.find_spec("sky") is None:
            rows.append(
                skipped(GROUP, case, goal, "SkyPilot not installed (pip install '.[skypilot]')")
            )
            continue
        try:
            spec = loader.from_text(text, file=str(home / f"{backend}.yaml"))
            one = interleaved(
                {"one": lambda s=spec, b=backend: api.dry_run(s, b, store=store)}, rounds
            )
            whole = interleaved({"run": lambda s=spec, b=backend: _run(s, b, store)}, RUN_ROUNDS)
            a, b = median_ms(one["one"]), median_ms(whole["run"])
            note = (
                "one array script"
                if isinstance(get_backend(backend), ArraySubmission)
                else "a plan per split"
            )
            rows.append(
                Row(
                    GROUP,
                    case,
                    ours=f"{ms(a)} / {ms(b)}",
                    goal=goal,
                    met=a <= ONE_GOAL_MS and b <= RUN_GOAL_MS,
                    note=f"{note}; 1 job: median of {rounds}; run: median of {RUN_ROUNDS}",
                    data={"one_ms": a, "run_ms": b},
                )
            )
        except Exception as exc:
            rows.append(failed(GROUP, case, goal, exc))
    store.close()
    return rows


def _run(spec: JobSpec, backend: str, store: Store) -> None:
    """What `splits.launch` renders for a run of SPLITS, without recording or submitting it."""
    jobs = [(i, new_id()) for i in range(SPLITS)]
    splits.render(resolve(spec, backend), store, new_id(), jobs)
