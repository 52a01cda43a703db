"""What every benchmark group shares: the row it reports, interleaved timing, devstack settings.

A row puts anylaunch's figure beside the alternative's and the goal, so the table reads
as a comparison. Timings are taken round-robin (A, B, A, B, ...) and reduced to medians:
a burst of load from another process on this 2-core machine then hits every contender
alike instead of whichever happened to run during it.
"""

from __future__ import annotations

import os
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from anylaunch.state import State
    from anylaunch.store import JobRecord, Store

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Row:
    """One line of the results table."""

    group: str
    case: str
    ours: str = ""  # anylaunch's measurement, as shown
    other: str = ""  # the alternative's measurement on the same run, as shown
    goal: str = ""
    met: bool | None = None  # None: no goal, or not measured
    note: str = ""
    data: dict[str, Any] = field(default_factory=dict)  # raw numbers for latest.json

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def skipped(group: str, case: str, goal: str, why: str) -> Row:
    return Row(group, case, goal=goal, note=f"skipped: {why}")


def failed(group: str, case: str, goal: str, exc: BaseException) -> Row:
    """A benchmark that broke still leaves a row, so the table shows what is missing."""
    message = " ".join(str(exc).split())[:160]
    return Row(group, case, goal=goal, met=False, note=f"error: {type(exc).__name__}: {message}")


def interleaved(
    contenders: Mapping[str, Callable[[], object]], rounds: int, warmup: int = 1
) -> dict[str, list[float]]:
    """Seconds per call of each contender, run round-robin after `warmup` untimed rounds."""
    for _ in range(warmup):  # page cache, .pyc files, connection pools
        for call in contenders.values():
            call()
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, call in contenders.items():
            start = time.perf_counter()
            call()
            samples[name].append(time.perf_counter() - start)
    return samples


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def ms(value: float) -> str:
    return f"{value:,.0f} ms" if value >= 100 else f"{value:.1f} ms"


def devstack_env() -> dict[str, str] | None:
    """The settings `scripts/devstack up` wrote to .devstack/env, or None when it is down."""
    path = ROOT / ".devstack" / "env"
    if not path.exists():
        return None
    env: dict[str, str] = {}
    for line in path.read_text().splitlines():
        words = shlex.split(line, comments=True)
        for word in words[1:] if words[:1] == ["export"] else words:
            key, sep, value = word.partition("=")
            if sep:
                env[key] = value
    return env


def use_devstack(*names: str) -> str | None:
    """Export the devstack settings into this process; the reason to skip if `names` are unset."""
    env = devstack_env() or {}
    for key, value in env.items():
        os.environ.setdefault(key, value)
    missing = [n for n in names if not os.environ.get(n)]
    if missing:
        return f"devstack not up ({', '.join(missing)} unset; scripts/devstack up)"
    return None


def start_ui(env: Mapping[str, str]) -> tuple[subprocess.Popen[str], str]:
    """`anylaunch ui` on a free port, with this environment; the server and its URL."""
    server = subprocess.Popen(
        [sys.executable, "-m", "anylaunch", "ui", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=dict(env),
    )
    assert server.stdout is not None
    line = server.stdout.readline()
    if not line.startswith("anylaunch ui: "):
        server.kill()
        raise RuntimeError(f"anylaunch ui did not start: {line!r}")
    return server, line.split(": ", 1)[1].strip()


def bench_record(
    store: Store,
    backend: str,
    name: str,
    state: State,
    native_id: str | None = None,
    *,
    job_id: str | None = None,
    **more: Any,
) -> JobRecord:
    """A job record as a bench plants it in `store` (a new id unless given), not added."""
    from anylaunch.store import JobRecord, new_id

    job_id = job_id or new_id()
    return JobRecord(
        id=job_id,
        name=name,
        backend=backend,
        state=state,
        job_dir=str(store.jobs_dir(job_id)),
        native_id=native_id,
        **more,
    )
