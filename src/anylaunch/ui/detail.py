"""What the job and run pages show, gathered through the same API the CLI uses.

Everything here is read per request from the store and the backend; nothing is cached, so
a page is never staler than the poll that built it. All text meant for the page passes
through the Masker before it leaves this module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anylaunch.backends.base import LogSource
from anylaunch.observe import logfile, runs, watch
from anylaunch.observe.reports import profile_reports
from anylaunch.observe.runs import RunView
from anylaunch.state import State
from anylaunch.store import JobRecord, Store, private
from anylaunch.ui import metrics, plots
from anylaunch.ui.masking import Masker, Names

CURVE_BYTES = 4 << 20  # the end of each log is enough for a curve
RUN_LANES = 100  # attempts drawn in a run's timeline; the grid shows every split


@dataclass
class Node:
    node: int
    where: str  # the log file, or the backend that serves the text
    size: int
    last_line: str


@dataclass
class JobPage:
    record: JobRecord
    events: list[dict[str, Any]]
    nodes: list[Node]
    timeline: str
    curve: str
    spec_json: str
    plan_json: str
    plan_files: dict[str, str]
    reports: list[str]
    diagnosis: dict[str, Any] | None
    # Every attempt (`Attempt.to_json`), shown when there was more than one or one was
    # diagnosed: how each ended and why the next was made.
    attempts: list[dict[str, Any]] = field(default_factory=list)
    secret_names: dict[str, str | None] = field(default_factory=dict)
    problem: str | None = None


def secret_names(record: JobRecord, root: Path) -> dict[str, str | None]:
    """Variables whose values this job holds as secrets (masked wherever they appear):
    by name, with the value its text wrote literally where it did (the dashboard's
    environment does not hold that one)."""
    names: dict[str, str | None] = dict.fromkeys(record.plan.get("secret_env", []))
    return {**names, **private.kept_secrets(root, record.id)}


def job_page(store: Store, job_id: str, masker: Masker) -> JobPage:
    job = watch.get(job_id, store=store)
    problem = None
    try:
        job.status()  # polls the backend if the job is live
    except Exception as exc:  # the stored facts are still worth showing
        problem = f"could not poll {job.backend}: {' '.join(str(exc).split())[:300]}"
    record = job.record
    names = secret_names(record, Path(store.root))
    sources = _sources(record)
    events = masker.data(job.events(), names)
    diagnosis = None
    if record.state.terminal and record.state is not State.SUCCEEDED:
        diagnosis = masker.data(job.diagnose().to_json(job.id), names)
    attempts = masker.data([a.to_json() for a in job.attempts()], names)
    if len(attempts) < 2 and not any(a["diagnosis"] or a["avoided"] for a in attempts):
        attempts = []
    plan = dict(record.plan)
    files = plan.pop("files", {}) or {}
    return JobPage(
        record=record,
        events=events,
        nodes=[_node(s, record.job_dir, masker, names) for s in sources],
        timeline=plots.timeline([plots.lane(record.id, events, not record.state.terminal)]),
        curve=plots.curve(_progress(sources, record.job_dir)),
        spec_json=masker.text(json.dumps(record.spec, indent=2), names),
        plan_json=masker.text(json.dumps(plan, indent=2), names),
        plan_files={k: masker.text(v, names) for k, v in files.items()},
        reports=profile_reports(record),
        diagnosis=diagnosis,
        attempts=attempts,
        secret_names=names,
        problem=masker.text(problem, names) if problem else None,
    )


def curve(store: Store, job_id: str) -> str:
    """Only the training curve, for the page to redraw while the job runs."""
    record = store.get(job_id)
    return plots.curve(_progress(_sources(record), record.job_dir))


def _sources(record: JobRecord) -> list[LogSource]:
    try:
        return watch.log_sources(record)
    except Exception:  # a backend that cannot be reached still leaves the rest of the page
        return []


def _node(source: LogSource, root: str, masker: Masker, names: Names) -> Node:
    lines = [line for line in logfile.read(source, root, tail_bytes=4096).lines if line.strip()]
    where = "backend" if source.text is not None else source.path or ""
    return Node(
        source.node,
        where,
        logfile.size(source, root),
        masker.text(lines[-1] if lines else "", names),
    )


def _progress(sources: list[LogSource], root: str) -> metrics.Progress:
    """The first node (by rank) whose log has a step or a loss: rank 0 usually prints them."""
    for source in sorted(sources, key=lambda s: s.node):
        text = "\n".join(logfile.read(source, root, tail_bytes=CURVE_BYTES).lines)
        progress = metrics.parse(text)
        if progress.points:
            return progress
    return metrics.Progress([], None)


@dataclass
class RunPage:
    view: RunView
    counts: dict[str, int]
    timeline: str
    failed: list[int]
    lanes_cut: int  # attempts left out of the timeline


def run_page(store: Store, run_id: str, masker: Masker) -> RunPage:
    view = runs.load(run_id, store)  # polls its live splits, as `anylaunch status RUN` does
    lanes: list[plots.Lane] = []
    total = 0
    for split_id, attempts in sorted(view.splits.items()):
        for number, attempt in enumerate(attempts, 1):
            total += 1
            if len(lanes) < RUN_LANES:
                events = masker.data(store.events(attempt.id))
                label = f"split {split_id}" + (f" #{number}" if len(attempts) > 1 else "")
                lanes.append(
                    plots.lane(label, events, not attempt.state.terminal, f"/jobs/{attempt.id}")
                )
    counts: dict[str, int] = {}
    for attempts in view.splits.values():
        counts[attempts[-1].state.value] = counts.get(attempts[-1].state.value, 0) + 1
    return RunPage(view, counts, plots.timeline(lanes), view.failed(), total - len(lanes))
