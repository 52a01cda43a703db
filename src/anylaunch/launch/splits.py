"""Parallel splits: a run of N jobs from one spec, each told its SPLIT_ID.

Every split is an ordinary job in the store (with `run_id` and `split_id`), so `ps`,
`status`, `logs` and `cancel` work on a split as on any job. Backends that implement
`ArraySubmission` (Slurm) get all splits as ONE native array submission — one sbatch for
a thousand splits — and report each split's native id; the others get one submit per
split. Watching a run and retrying its failed splits build on `launch(..., run_id=,
splits=[failed ids])`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from anylaunch.errors import UsageError
from anylaunch.launch import pipeline
from anylaunch.observe import watch
from anylaunch.state import State
from anylaunch.store import JobRecord, Store, busy_elsewhere, new_id

if TYPE_CHECKING:
    from anylaunch.jobfile.spec import JobSpec
    from anylaunch.launch.resolve import Resolved

SPLIT_ENV = "SPLIT_ID"
VALUE_ENV = "SPLIT_VALUE"


@dataclass
class Run:
    """The jobs of one run, in split order."""

    id: str
    jobs: list[watch.Job]
    store: Store
    submitted: list[int] | None = None  # after `resume`: the splits it had to submit

    def states(self) -> dict[int, State]:
        """Each split's current state (one backend poll for all of them)."""
        records = watch.refresh(self.store.list(limit=None, run_id=self.id), self.store)
        return {r.split_id: r.state for r in records if r.split_id is not None}


def launch(
    job: Resolved,
    splits: int | Sequence[int] | None = None,
    *,
    store: Store | None = None,
    run_id: str | None = None,
    check: bool = True,
    max_parallel: int = 8,
    key: str | None = None,
) -> Run:
    """Submit the splits (0..N-1, the listed split ids, or the spec's `splits:`) and
    return at once. Backends without arrays get up to `max_parallel` submits at a time.

    Every split is recorded, in one transaction, before the first submit. With a `key`
    (`run_key`: the CLI's same command again) an unfinished run of that key is resumed
    instead of a new one started; `run_id` adds the splits to an existing run (retry).
    """
    if splits is None:
        splits = len(job.spec.split_values())
    split_ids = list(range(splits)) if isinstance(splits, int) else list(splits)
    if not split_ids or len(set(split_ids)) != len(split_ids) or min(split_ids) < 0:
        raise UsageError(f"splits must be a count >= 1 or distinct ids >= 0, not {splits!r}")
    store = store or Store()
    if check:  # once for the run, not once per split
        pipeline.check(job)
    if key is not None and run_id is None:
        existing = store.open_run(key)
        if existing is not None:
            return resume(existing, job, store=store, max_parallel=max_parallel)
    new_run = run_id is None
    run_id = run_id or new_id()
    batch = render(job, store, run_id, [(i, new_id()) for i in split_ids], new_run=new_run)
    holder = pipeline.record(batch, store, key=key)
    if holder != run_id:  # the same command, started a moment earlier, owns the run
        return resume(holder or run_id, job, store=store, max_parallel=max_parallel)
    pipeline.send(batch, store, max_parallel)
    return Run(run_id, [watch.Job(store.get(r.id), store) for r in batch.records], store)


def run_key(job: Resolved) -> str:
    """What makes two `anylaunch run` commands the same run: the job (secrets masked, so
    a rotated token still matches), the backend and the directory it was run from."""
    text = json.dumps(
        {"backend": job.backend, "spec": job.spec.redacted(), "cwd": os.getcwd()},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def unsent(run_id: str, store: Store) -> list[JobRecord]:
    """Splits of a run recorded without a native id (never submitted, or submitted and
    never recorded), whose submitter is gone."""
    latest: dict[int, JobRecord] = {}
    for record in sorted(store.list(limit=None, run_id=run_id), key=lambda r: r.created_at):
        latest[record.split_id or 0] = record
    return [
        r
        for r in latest.values()
        if r.native_id is None
        and (not r.state.terminal or "submitter" in r.meta)  # unsettled: maybe submitted
        and not busy_elsewhere(r.meta.get("submitter"))
    ]


def resume(run_id: str, job: Resolved, *, store: Store, max_parallel: int = 8) -> Run:
    """Finish the submission of a run that a crash interrupted: splits the backend has
    get their native id (`watch.reconcile`), the others are submitted under the job ids
    they were recorded with — so no split is lost and none runs twice."""
    latest: dict[int, JobRecord] = {}
    for record in sorted(store.list(limit=None, run_id=run_id), key=lambda r: r.created_at):
        latest[record.split_id or 0] = record
    if not latest:
        raise UsageError(f"run {run_id} has no splits")
    todo = watch.reconcile(job.impl, list(latest.values()), store)
    if todo:
        batch = render(job, store, run_id, [(r.split_id or 0, r.id) for r in todo], recorded=True)
        for record in batch.records:
            store.set_plan(record.id, record.plan)
        pipeline.send(batch, store, max_parallel)
    run = Run(run_id, [watch.Job(store.get(r.id), store) for r in latest.values()], store)
    run.submitted = sorted(r.split_id or 0 for r in todo)
    return run


def render(
    job: Resolved,
    store: Store,
    run_id: str,
    splits: Sequence[tuple[int, str]],
    *,
    new_run: bool = False,
    recorded: bool = False,
) -> pipeline.Batch:
    """Render each (split id, job id) of a run: one array plan shared by all where the
    backend submits arrays, one plan each elsewhere. `recorded`: a resumed run's jobs."""
    return pipeline.render(
        job, store, splits, run_id=run_id, new_run=new_run, recorded=recorded, array=True,
        per_job=split_env(job.spec),
    )  # fmt: skip


def split_env(spec: JobSpec) -> Callable[[int | None], dict[str, str]]:
    """Each split's environment: the job's, with SPLIT_ID (and SPLIT_VALUE). It is all that
    sets one split apart from another (a split also drops `splits`, see `with_split`)."""
    values = spec.split_values()  # once for the run, not once per split

    def env(split_id: int | None) -> dict[str, str]:
        split_id = split_id or 0
        out = {**spec.env, SPLIT_ENV: str(split_id)}
        value = values[split_id] if split_id < len(values) else None
        if value is not None:
            out[VALUE_ENV] = value
        return out

    return env


def with_split(spec: JobSpec, split_id: int | None) -> JobSpec:
    """The spec of one split: SPLIT_ID (and SPLIT_VALUE) in its environment, no `splits`."""
    return spec.model_copy(update={"env": split_env(spec)(split_id), "splits": None})
