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
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from anylaunch import api, config
from anylaunch.backends.base import ArraySubmission, Backend, PlanContext, get_backend
from anylaunch.errors import BackendError, SubmitOutcomeUnknown, UsageError
from anylaunch.state import State
from anylaunch.store import JobRecord, Store, busy_elsewhere, new_id

if TYPE_CHECKING:
    from anylaunch.plan import Plan
    from anylaunch.spec import JobSpec

SPLIT_ENV = "SPLIT_ID"
VALUE_ENV = "SPLIT_VALUE"


@dataclass
class Run:
    """The jobs of one run, in split order."""

    id: str
    jobs: list[api.Job]
    store: Store
    submitted: list[int] | None = None  # after `resume`: the splits it had to submit

    def states(self) -> dict[int, State]:
        """Each split's current state (one backend poll for all of them)."""
        records = api.refresh(self.store.list(limit=None, run_id=self.id), self.store)
        return {r.split_id: r.state for r in records if r.split_id is not None}


def launch(
    spec: JobSpec,
    splits: int | Sequence[int] | None = None,
    backend: str | None = None,
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
        splits = len(spec.split_values())
    split_ids = list(range(splits)) if isinstance(splits, int) else list(splits)
    if not split_ids or len(set(split_ids)) != len(split_ids) or min(split_ids) < 0:
        raise UsageError(f"splits must be a count >= 1 or distinct ids >= 0, not {splits!r}")
    store = store or Store()
    name = config.route(spec, backend)
    spec = api.with_storage_env(spec)
    if check:  # once for the run, not once per split
        from anylaunch import preflight

        failures = preflight.failed(preflight.run(spec, name))
        if failures:
            raise preflight.PreflightFailed(failures)
    if key is not None and run_id is None:
        existing = store.open_run(key)
        if existing is not None:
            return resume(existing, spec, store=store, max_parallel=max_parallel)
    impl = get_backend(name)
    new_run = run_id is None
    run_id = run_id or new_id()
    planned = _plan(spec, impl, name, store, run_id, [(i, new_id()) for i in split_ids])
    records = [record for record, _ in planned]
    if new_run:
        winner = store.add_run(run_id, key, records)
        if winner != run_id:  # the same command, started a moment earlier, owns the run
            return resume(winner, spec, store=store, max_parallel=max_parallel)
    else:
        store.add_many(records)
    _submit(impl, spec, planned, store, max_parallel)
    return Run(run_id, [api.Job(store.get(r.id), store) for r in records], store)


def run_key(spec: JobSpec, backend: str) -> str:
    """What makes two `anylaunch run` commands the same run: the job (secrets masked, so
    a rotated token still matches), the backend and the directory it was run from."""
    text = json.dumps(
        {"backend": backend, "spec": spec.redacted(), "cwd": os.getcwd()},
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


def resume(run_id: str, spec: JobSpec, *, store: Store, max_parallel: int = 8) -> Run:
    """Finish the submission of a run that a crash interrupted: splits the backend has
    get their native id (`api.reconcile`), the others are submitted under the job ids
    they were recorded with — so no split is lost and none runs twice."""
    latest: dict[int, JobRecord] = {}
    for record in sorted(store.list(limit=None, run_id=run_id), key=lambda r: r.created_at):
        latest[record.split_id or 0] = record
    if not latest:
        raise UsageError(f"run {run_id} has no splits")
    backend = next(iter(latest.values())).backend
    impl = get_backend(backend)
    todo = api.reconcile(impl, list(latest.values()), store)
    if todo:
        planned = _plan(
            api.with_storage_env(spec),
            impl,
            backend,
            store,
            run_id,
            [(r.split_id or 0, r.id) for r in todo],
            resumed=True,
        )
        for record, plan in planned:
            store.set_plan(record.id, plan.model_dump(mode="json"))
        _submit(impl, spec, planned, store, max_parallel)
    run = Run(run_id, [api.Job(store.get(r.id), store) for r in latest.values()], store)
    run.submitted = sorted(r.split_id or 0 for r in todo)
    return run


def _plan(
    spec: JobSpec,
    impl: Backend,
    name: str,
    store: Store,
    run_id: str,
    splits: Sequence[tuple[int, str]],
    *,
    resumed: bool = False,
) -> list[tuple[JobRecord, Plan]]:
    """Render each (split id, job id): one array plan shared by all, or one plan each."""
    done = Counter(r.split_id for r in store.list(limit=None, run_id=run_id))
    contexts: list[tuple[int, PlanContext, JobSpec]] = []
    for split_id, job_id in splits:
        one = with_split(spec, split_id)
        if "ANYLAUNCH_ATTEMPT" not in one.env:  # the resume contract: which try this is
            attempt = done[split_id] + (0 if resumed else 1)
            one = one.model_copy(update={"env": {**one.env, "ANYLAUNCH_ATTEMPT": str(attempt)}})
        ctx = impl.prepare(one, job_id, str(store.jobs_dir(job_id)), store)
        # An array renders one script from the run's spec: each task's attempt rides along.
        attempt = int(one.env.get("ANYLAUNCH_ATTEMPT", "1"))
        ctx = PlanContext(ctx.job_id, ctx.job_dir, {**ctx.values, "attempt": attempt})
        contexts.append((split_id, ctx, one))
    if isinstance(impl, ArraySubmission):
        array = impl.plan_array(spec, [(i, ctx) for i, ctx, _ in contexts])
        plans = [array] * len(contexts)
    else:
        plans = [impl.plan(one, ctx) for _, ctx, one in contexts]
    return [
        (
            JobRecord(
                id=ctx.job_id,
                name=plan.name,
                backend=name,
                state=State.PENDING,
                job_dir=ctx.job_dir,
                run_id=run_id,
                split_id=split_id,
                spec=one.redacted(),
                plan=plan.model_dump(mode="json"),
            ),
            plan,
        )
        for (split_id, ctx, one), plan in zip(contexts, plans, strict=True)
    ]


def _submit(
    impl: Backend,
    spec: JobSpec,
    planned: list[tuple[JobRecord, Plan]],
    store: Store,
    max_parallel: int,
) -> None:
    """Submit recorded splits: one array submission, or bounded-concurrency submits."""
    if isinstance(impl, ArraySubmission):
        plan = planned[0][1]
        _as_array(impl, plan, [r for r, _ in planned], spec, store)
        return
    root = store.root

    def one(item: tuple[JobRecord, Plan]) -> None:
        record, plan = item
        own = Store(root)  # a connection per thread: sqlite3 objects stay in their thread
        try:
            api.send(impl, record, plan, {k: spec.env[k] for k in plan.secret_env}, own)
        finally:
            own.close()

    with ThreadPoolExecutor(max(1, min(max_parallel, len(planned)))) as pool:
        list(pool.map(one, planned))


def with_split(spec: JobSpec, split_id: int) -> JobSpec:
    """The spec of one split: SPLIT_ID (and SPLIT_VALUE) in its environment, no `splits`."""
    env = {**spec.env, SPLIT_ENV: str(split_id)}
    values = spec.split_values()
    value = values[split_id] if split_id < len(values) else None
    if value is not None:
        env[VALUE_ENV] = value
    return spec.model_copy(update={"env": env, "splits": None})


def _as_array(
    impl: Backend, plan: Plan, records: list[JobRecord], spec: JobSpec, store: Store
) -> None:
    secrets = {k: spec.env[k] for k in plan.secret_env}
    if not isinstance(impl, ArraySubmission):
        raise TypeError(f"the {impl.name} backend does not submit arrays")
    try:
        natives = impl.submit_array(plan, secrets)
    except SubmitOutcomeUnknown as exc:
        for record in records:  # found by the array's --comment at the next poll
            store.mark_unknown(record.id, api.submit_unknown_detail(exc))
        return
    except Exception as exc:
        for record in records:
            store.transition(record.id, State.FAILED, detail=f"submit failed: {exc}")
            store.settle(record.id)
        if isinstance(exc, BackendError):
            raise
        raise BackendError(f"submit to {records[0].backend} failed: {exc}") from exc
    for record, (native_id, meta) in zip(records, natives, strict=True):
        store.set_native(record.id, native_id, meta)
        record.native_id, record.meta = native_id, meta
        api.honour_cancel(impl, record.id, store)
