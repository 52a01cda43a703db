"""A program that fails at once is recorded FAILED with its own exit status, never
SUCCEEDED, even when its node ends before the supervisor looks and the machine is busy.

Each job runs through the real CLI, as a user starts it: the submitting process forks,
starts the nodes and becomes the supervisor, which must be the only process that ever
collects a node's exit status. Four jobs run at a time while two spinning processes keep
both cores busy. The whole count (1,000) runs with `-m slow`; the suite runs 60 of them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from reliability_helpers import FIGURES

# Every test here starts jobs and CLI processes of its own.
pytestmark = pytest.mark.usefixtures("spawns")

# (job file, the exit status the program really ends with)
KINDS = {
    "false-1": ('command: ["false"]', 1, 1),
    "false-2": ('command: ["false"]', 2, 1),
    "exit3-1": ('command: "exit 3"', 1, 3),
    "exit3-2": ('command: "exit 3"', 2, 3),
    "missing-1": ("command: ./missing_script.sh --lr 1", 1, 127),
    "missing-2": ("command: ./missing_script.sh --lr 1", 2, 127),
}
AT_ONCE = 4


def _write_jobs(folder: Path) -> dict[str, Path]:
    files = {}
    for kind, (command, nodes, _) in KINDS.items():
        path = folder / f"{kind}.yaml"
        path.write_text(f"name: {kind}\nlauncher: none\nnodes: {nodes}\n{command}\n")
        files[kind] = path
    return files


def _run(path: Path, env: dict[str, str]) -> tuple[int, dict | None, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "anylaunch", "run", str(path), "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=path.parent,
        timeout=120,
    )
    try:
        return proc.returncode, json.loads(proc.stdout), proc.stderr
    except ValueError:
        return proc.returncode, None, proc.stdout[-300:] + proc.stderr[-300:]


def _busy_cores() -> list[subprocess.Popen[bytes]]:
    spin = "while True: pass"
    return [
        subprocess.Popen([sys.executable, "-c", spin]) for _ in range(max(2, os.cpu_count() or 2))
    ]


def _check(count: int, home: Path, tmp_path: Path) -> None:
    files = _write_jobs(tmp_path)
    order = [kind for _ in range(count // len(KINDS) + 1) for kind in KINDS][:count]
    env = {**os.environ, "ANYLAUNCH_HOME": str(home)}
    wrong: Counter[str] = Counter()
    examples: list[str] = []
    burners = _busy_cores()
    try:
        with ThreadPoolExecutor(AT_ONCE) as pool:
            results = pool.map(lambda kind: (kind, _run(files[kind], env)), order)
            for kind, (rc, doc, err) in results:
                expected = KINDS[kind][2]
                seen = (rc, doc and doc.get("state"), doc and doc.get("exit_code"))
                if seen != (1, "FAILED", expected):
                    wrong[kind] += 1
                    if len(examples) < 5:
                        examples.append(f"{kind}: rc/state/exit {seen}, expected {expected}; {err}")
    finally:
        for proc in burners:
            proc.kill()
            proc.wait()
    FIGURES["instant failures"] += count
    FIGURES["failures recorded wrong"] += sum(wrong.values())
    assert not wrong, f"{sum(wrong.values())} of {count} wrong ({dict(wrong)}): {examples}"


# It keeps both cores busy on purpose, so beside other work it is slow; what it checks is
# that no state is wrong, never how fast its jobs end.
@pytest.mark.timeout(900)
def test_instant_failures_are_failed_with_their_exit_status_under_load(home, tmp_path):
    _check(60, home, tmp_path)


@pytest.mark.slow
def test_a_thousand_instant_failures_are_failed_with_their_exit_status_under_load(home, tmp_path):
    _check(1000, home, tmp_path)
