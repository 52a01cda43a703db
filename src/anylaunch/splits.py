"""Parallel splits (R-L14): a run of N jobs from one spec, each told its SPLIT_ID.

Every split is an ordinary job in the store (with `run_id` and `split_id`), so `ps`,
`status`, `logs` and `cancel` work on a split as on any job. Backends that declare
`supports_arrays` (Slurm) get all splits as ONE native array submission — one sbatch for
a thousand splits — and report each split's native id; the others get one submit per
split. Watching a run and retrying its failed splits build on `launch(..., run_id=,
splits=[failed ids])`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from anylaunch import api, config
from anylaunch.backends.base import PlanContext, get_backend
from anylaunch.errors import BackendError, UsageError
from anylaunch.state import State
from anylaunch.store import JobRecord, Store, new_id

if TYPE_CHECKING:
    from anylaunch.plan import Plan
    from anylaunch.spec import JobSpec

SPLIT_ENV = "SPLIT_ID"
VALUE_ENV = "SPLIT_VALUE"


class ArrayBackend(Protocol):
    """What a backend with `capabilities.supports_arrays` adds to the Backend protocol."""

    def plan_array(self, spec: JobSpec, splits: Sequence[tuple[int, PlanContext]]) -> Plan: ...

    def submit_array(
        self, plan: Plan, secrets: Mapping[str, str]
    ) -> list[tuple[str, dict[str, Any]]]:
        """Submit once; one (native id, meta) per split, in the plan's split order."""
        ...


@dataclass
class Run:
    """The jobs of one run, in split order."""

    id: str
    jobs: list[api.Job]
    store: Store

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
) -> Run:
    """Submit the splits (0..N-1, the listed split ids, or the spec's `splits:`) and
    return at once. Backends without arrays get up to `max_parallel` submits at a time."""
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
    impl = get_backend(name)
    run_id = run_id or new_id()
    if impl.capabilities.supports_arrays:
        return Run(run_id, _as_array(spec, split_ids, name, impl, store, run_id), store)  # type: ignore[arg-type]
    root = store.root

    def one(split_id: int) -> str:
        # A connection per thread: sqlite3 objects stay in the thread that made them.
        own = Store(root)
        try:
            job = api.submit(
                with_split(spec, split_id),
                name,
                store=own,
                run_id=run_id,
                split_id=split_id,
                check=False,
            )
            return job.id
        finally:
            own.close()

    with ThreadPoolExecutor(max(1, min(max_parallel, len(split_ids)))) as pool:
        ids = list(pool.map(one, split_ids))
    return Run(run_id, [api.Job(store.get(job_id), store) for job_id in ids], store)


def with_split(spec: JobSpec, split_id: int) -> JobSpec:
    """The spec of one split: SPLIT_ID (and SPLIT_VALUE) in its environment, no `splits`."""
    env = {**spec.env, SPLIT_ENV: str(split_id)}
    values = spec.split_values()
    if split_id < len(values) and values[split_id] is not None:
        env[VALUE_ENV] = values[split_id]
    return spec.model_copy(update={"env": env, "splits": None})


def _as_array(
    spec: JobSpec,
    split_ids: list[int],
    name: str,
    impl: ArrayBackend,
    store: Store,
    run_id: str,
) -> list[api.Job]:
    contexts = []
    for split_id in split_ids:
        job_id = new_id()
        ctx = impl.prepare(spec, job_id, str(store.jobs_dir(job_id)), store)  # type: ignore[attr-defined]
        contexts.append((split_id, ctx))
    plan = impl.plan_array(spec, contexts)
    records = store.add_many(
        [
            JobRecord(
                id=ctx.job_id,
                name=plan.name,
                backend=name,
                state=State.PENDING,
                job_dir=ctx.job_dir,
                run_id=run_id,
                split_id=split_id,
                spec=with_split(spec, split_id).redacted(),
                plan=plan.model_dump(mode="json"),
            )
            for split_id, ctx in contexts
        ]
    )
    secrets = {k: spec.env[k] for k in plan.secret_env}
    try:
        natives = impl.submit_array(plan, secrets)
    except Exception as exc:
        for record in records:
            store.transition(record.id, State.FAILED, detail=f"submit failed: {exc}")
        if isinstance(exc, BackendError):
            raise
        raise BackendError(f"submit to {name} failed: {exc}") from exc
    jobs = []
    for record, (native_id, meta) in zip(records, natives, strict=True):
        store.set_native(record.id, native_id, meta)
        record.native_id, record.meta = native_id, meta
        jobs.append(api.Job(record, store))
    return jobs
