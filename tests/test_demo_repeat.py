"""The README's first command, run thirty times in a row from an empty checkpoint folder:
every run SUCCEEDED, and its log holds nothing alarming (no warning, traceback or abort).

Slow (about half a minute a run): `pytest -m slow tests/test_demo_repeat.py`.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

RUNS = 30
# What a clean log never shows: a Python warning or traceback, a C++ abort, torch's
# elastic agent reporting a failed worker, NumPy missing.
ALARMING = re.compile(
    r"Warning|Traceback|terminate called|SIGABRT|FAILED|ChildFailedError|NumPy|Error", re.I
)


@pytest.mark.slow
@pytest.mark.timeout(3600)  # thirty runs of about half a minute each
def test_the_demo_succeeds_thirty_times_in_a_row_with_a_clean_log(cli, tmp_path):
    checkpoints = tmp_path / "ckpt"
    failures = []
    for run in range(RUNS):
        shutil.rmtree(checkpoints, ignore_errors=True)
        result = cli(
            "run",
            str(ROOT / "examples" / "ddp_demo.yaml"),
            env={"CHECKPOINT_DIR": str(checkpoints)},
            timeout=600,
        )
        log = result.out + result.err
        alarming = [line for line in log.splitlines() if ALARMING.search(line)]
        saved = (checkpoints / "latest.pt").exists()
        if result.rc != 0 or "SUCCEEDED" not in result.err or alarming or not saved:
            tail = log.splitlines()[-15:]
            failures.append(f"run {run + 1}: rc {result.rc}, checkpoint saved {saved}: {tail}")
    assert failures == [], f"{len(failures)} of {RUNS} runs not clean: {failures}"
