"""Helpers of the reliability suite: the figures it reports, store invariants, processes.

A plain module (tests/ is not a package); the suite's conftest prints FIGURES at the end.
"""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
import sys
from collections import Counter
from pathlib import Path

from anylaunch.state import State, may_become_unknown, may_move
from helpers import wait_until  # noqa: F401 - re-exported for the reliability tests

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable

# What the suite promises, counted across its tests and printed in pytest's summary.
FIGURES: Counter[str] = Counter()
FAULT_KINDS: Counter[str] = Counter()  # "faults injected", split by what was broken
FIGURE_ORDER = (
    "faults injected",
    "jobs submitted",
    "duplicates",
    "lost",
    "tracebacks",
    "secret hits",
    "crash trials",
    "processes at once",
    "hostile inputs",
    "offsets tried",
    "links tried",
    "supervisor kills",
)


def fault(kind: str, count: int = 1) -> None:
    """Count faults injected, by kind (api, scheduler, store, ...), for the summary."""
    FIGURES["faults injected"] += count
    FAULT_KINDS[kind] += count


def store_problems(db_path: Path) -> list[str]:
    """Everything wrong with a store file: SQLite's own integrity check, then ours —
    every job has a first 'recorded' PENDING event, its events only move forward (the
    rule of state.may_move, or into UNKNOWN by Store.mark_unknown) and end in the row's state, and no event names a missing job."""
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        problems = [r[0] for r in db.execute("PRAGMA integrity_check") if r[0] != "ok"]
        problems += [f"foreign key: {r}" for r in db.execute("PRAGMA foreign_key_check")]
        orphans = db.execute(
            "SELECT COUNT(*) FROM events WHERE job_id NOT IN (SELECT id FROM jobs)"
        ).fetchone()[0]
        if orphans:
            problems.append(f"{orphans} events of jobs that are not in the store")
        for job_id, state in db.execute("SELECT id, state FROM jobs"):
            events = db.execute(
                "SELECT state, detail FROM events WHERE job_id = ? ORDER BY at, rowid", (job_id,)
            ).fetchall()
            if not events or events[0] != ("PENDING", "recorded"):
                problems.append(f"{job_id}: first event {events[:1]}, not PENDING/recorded")
                continue
            moved = [State(s) for s, _ in events if s is not None]
            changes = [(a, b) for a, b in itertools.pairwise(moved) if a is not b]
            # Into UNKNOWN only by Store.mark_unknown (never from a terminal state).
            if any(
                not (may_move(a, b) or (b is State.UNKNOWN and may_become_unknown(a)))
                for a, b in changes
            ):
                problems.append(f"{job_id}: states moved backwards: {[s.value for s in moved]}")
            if moved[-1].value != state:
                problems.append(f"{job_id}: row says {state}, last event {moved[-1].value}")
    finally:
        db.close()
    return problems


def count_tracebacks(*texts: str) -> int:
    found = sum(t.count("Traceback (most recent call last)") for t in texts)
    FIGURES["tracebacks"] += found
    return found


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "ANYLAUNCH_HOME": str(home), **extra}


def load_json(text: str):
    try:
        return json.loads(text)
    except ValueError as exc:
        raise AssertionError(f"not JSON: {text[:500]!r}") from exc
