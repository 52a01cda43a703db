"""The submission pipeline: the one path from a resolved job to jobs a backend holds.

Every command that launches takes the same named stages, in order:

    parse -> load -> resolve -> check -> render -> record -> send -> watch

`load` (jobfile/) gives a JobSpec, and `resolve` (resolve.py) routes it once, into a
`Resolved` that every later stage takes. The stages here:

- check: the quick preflight checks, once per submission (`check`);
- render: for each job, which attempt it is (`ANYLAUNCH_ATTEMPT`), the backend's
  `prepare` and `plan` — or one `plan_array` for all splits of an array backend — and
  the values of the secrets its plan names (`render`); for a submission (not a dry
  run), once for all its jobs, the git state of the folder its code comes from and, for
  a job run from a snapshot, the list of files to copy (over its size limit: an error
  before anything is stored). Nothing is stored or sent;
- record: the jobs go into the store (PENDING, with their submitter and source) before
  anything is sent, a run's splits in one transaction, so after a crash every job is in
  the store (`record`);
- send: the snapshot is copied into the job's folder (once for the jobs of one
  submission) and its hash recorded; each plan goes to the backend with its secret
  values; native ids are recorded, a refused job ends FAILED, one whose answer was lost
  stays UNKNOWN, and a cancel that came in meanwhile is carried out (`send`).

A dry-run is `render` alone (`dry_run`), so the plan it shows is the plan a submit
sends. A single job (`submit`), the splits of a run and a retry of its failed splits
(`splits.launch`), a run a crash interrupted (`splits.resume`) and a workflow's steps
are all batches through render -> record -> send. Watching (polling, logs) is the
business of `anylaunch.api` and `anylaunch.observe`.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anylaunch.backends.base import ArraySubmission, Backend, PlanContext
from anylaunch.backends.checks import Check, failed
from anylaunch.errors import BackendError, ConfigError, SubmitOutcomeUnknown
from anylaunch.jobfile.secrets import MIN_SECRET, is_secret_name, masked_env
from anylaunch.launch import preflight, provenance, runkey, snapshot
from anylaunch.observe import retries
from anylaunch.observe.watch import honour_cancel
from anylaunch.state import State
from anylaunch.store import JobRecord, Store, new_id, private

if TYPE_CHECKING:
    from anylaunch.backends.plan import Plan
    from anylaunch.jobfile.spec import JobSpec
    from anylaunch.launch.resolve import Resolved

ATTEMPT_ENV = "ANYLAUNCH_ATTEMPT"


@dataclass
class Planned:
    """One job rendered and ready to record: what is stored, and what is sent."""

    record: JobRecord
    plan: Plan
    # The values of the secrets the plan names: kept in memory until sent, never in the
    # store or plan (only those the job's text wrote literally are kept for readers to
    # mask, by `private.keep_secrets`, where only their owner reads them).
    secrets: dict[str, str] = field(repr=False)


@dataclass
class Batch:
    """The jobs of one submission; `array`: one plan for all, submitted once. A batch
    of a run's splits names the run, and whether this batch starts it."""

    impl: Backend
    jobs: list[Planned]
    array: bool = False
    run_id: str | None = None
    new_run: bool = False
    # What the snapshot copies, when the jobs run from one (listed at render time).
    survey: snapshot.Survey | None = None

    @property
    def records(self) -> list[JobRecord]:
        return [job.record for job in self.jobs]


def check(resolved: Resolved, *, warn: Callable[[Check], None] | None = None) -> None:
    """The quick preflight checks: each warning to `warn`, PreflightFailed (nothing
    stored) if one fails."""
    checks = preflight.run(resolved)
    if warn is not None:
        for one in checks:
            if one.status == "warn":
                warn(one)
    failures = failed(checks)
    if failures:
        raise preflight.PreflightFailed(failures)


def dry_run(resolved: Resolved, store: Store) -> Plan:
    """What `submit` would send: `render`, with nothing reserved, stored or sent."""
    batch = render(resolved, store, [(None, new_id())], reserve=False)
    return batch.jobs[0].plan


def submit(
    resolved: Resolved,
    store: Store,
    *,
    run_id: str | None = None,
    split_id: int | None = None,
) -> JobRecord:
    """One job through render -> record -> send; its record once the backend has it."""
    batch = render(resolved, store, [(split_id, new_id())], run_id=run_id)
    record(batch, store)
    send(batch, store)
    return batch.records[0]


def render(
    resolved: Resolved,
    store: Store,
    jobs: Sequence[tuple[int | None, str]],
    *,
    run_id: str | None = None,
    new_run: bool = False,
    recorded: bool = False,
    array: bool = False,
    per_job: Callable[[int | None], dict[str, str]] | None = None,
    reserve: bool = True,
    avoid: Sequence[str] = (),
) -> Batch:
    """Render each (split id, job id); nothing is stored or sent.

    `recorded`: the jobs are in the store already (a resumed run), so they count among
    their split's attempts. `array`: the jobs are the splits of one run, sent as one
    native array where the backend can. `per_job` gives one job's environment (a split's
    SPLIT_ID); jobs then run the spec without `splits`. `reserve=False` (a dry-run)
    takes no port or other resource in the store. `avoid`: hosts the jobs must not run
    on (an earlier attempt failed there), where the backend can keep them off.
    """
    impl, spec = resolved.impl, resolved.spec
    # The jobs of one submission differ only in their environment (split id, value,
    # attempt): the spec is stored as JSON once, and each job's record gets its own env.
    base = spec if per_job is None else spec.model_copy(update={"splits": None})
    stored = base.redacted()
    as_array = array and isinstance(impl, ArraySubmission)
    done = _attempts(store, run_id, [split_id for split_id, _ in jobs])
    values = impl.secret_values(spec)
    rendered: list[tuple[int | None, PlanContext, JobSpec, dict[str, str]]] = []
    jobs_root = store.jobs_dir("").as_posix().rstrip("/")  # job dirs as text: one per job
    for split_id, job_id in jobs:
        env = per_job(split_id) if per_job else dict(base.env)
        if ATTEMPT_ENV not in env:  # the resume contract: which try this is
            env[ATTEMPT_ENV] = str(done[split_id] + (0 if recorded else 1))
        attempt = int(env[ATTEMPT_ENV])
        keyed = runkey.tracker_env(runkey.run_key(job_id, run_id, split_id), env)
        env.update(keyed)
        # An array renders one script from the run's spec (`plan_array`): its tasks need
        # no spec of their own, their differences ride in their contexts.
        one = base if as_array or env == base.env else base.model_copy(update={"env": env})
        ctx = impl.prepare(one, job_id, f"{jobs_root}/{job_id}", store, reserve=reserve)
        ctx = PlanContext(
            ctx.job_id, ctx.job_dir, {**ctx.values, "attempt": attempt, "per_job_env": keyed}
        )
        if avoid:
            ctx = impl.keep_off(one, ctx, avoid)
        rendered.append((split_id, ctx, one, env))
    if as_array and isinstance(impl, ArraySubmission):
        shared = impl.plan_array(spec, [(i or 0, ctx) for i, ctx, _, _ in rendered])
        plans = [shared] * len(rendered)
        # The array's plan holds every task: turned into JSON once, not once per task,
        # and stored whole only with the first, or a run of N splits would cost N times
        # a plan that grows with N.
        dumped = shared.model_dump(mode="json")
        rest = impl.task_plan(dumped, rendered[0][1].job_id) if len(rendered) > 1 else dumped
        dumps = [dumped, *[rest] * (len(rendered) - 1)]
        shared_secrets = secrets_for(shared, values)
        secrets = [shared_secrets] * len(rendered)
    else:
        plans = [impl.plan(one, ctx) for _, ctx, one, _ in rendered]
        dumps = [plan.model_dump(mode="json") for plan in plans]
        secrets = [secrets_for(plan, values) for plan in plans]
    # Which code the jobs run: looked at once for the whole submission, and only for a
    # real one (a dry run shows the plan, which says whether a snapshot is made).
    source = survey = None
    if reserve and plans:
        folder = code_folder(plans[0], spec)
        source = provenance.read(folder)
        if plans[0].snapshot:
            limit = spec.snapshot.max_mb if spec.snapshot else snapshot.DEFAULT_MAX_MB
            survey = snapshot.survey(folder, limit, file=spec.source)
    planned = [
        Planned(
            JobRecord(
                id=ctx.job_id,
                name=plan.name,
                backend=impl.name,
                state=State.PENDING,
                job_dir=ctx.job_dir,  # a backend may place it elsewhere (slurm.job_dir)
                run_id=run_id,
                split_id=split_id,
                spec={**stored, "env": masked_env(env)},
                plan=dumped_plan,
                source=source,
                meta={"attempt": ctx.values["attempt"]},
            ),
            plan,
            job_secrets,
        )
        for (split_id, ctx, _, env), plan, dumped_plan, job_secrets in zip(
            rendered, plans, dumps, secrets, strict=True
        )
    ]
    return Batch(impl, planned, as_array, run_id, new_run, survey)


def code_folder(plan: Plan, spec: JobSpec) -> str:
    """The folder whose code the job runs: the plan's, else the job file's, else here."""
    if plan.code_dir:
        return plan.code_dir
    return os.path.dirname(os.path.abspath(spec.source)) if spec.source else os.getcwd()


def record(batch: Batch, store: Store, *, key: str | None = None) -> str | None:
    """Store the batch's jobs before anything is sent; the id of the run holding them.

    A new run's splits go in one transaction, under `key` when the same command run
    again should find the run (`splits.run_key`): if that command, started a moment
    earlier, recorded it first, nothing is stored and the other run's id is returned.
    """
    held = [v for k, v in os.environ.items() if is_secret_name(k) and len(v) >= MIN_SECRET]
    for job in batch.jobs:
        private.keep_secrets(store.root, job.record.id, _literal(job.secrets, held))
    if batch.new_run and batch.run_id is not None:
        return store.add_run(batch.run_id, key, batch.records)
    store.add_many(batch.records)
    return batch.run_id


def _literal(secrets: dict[str, str], held: list[str]) -> dict[str, str]:
    """The secrets a later reader in this environment could not mask by itself: values
    the job's text wrote literally. A value this environment holds under the same name,
    or that holds a secret-looking variable's value (`${ACCESS_KEY}` in it, or
    CLOUD_METADATA made from the storage keys), is masked by every reader already."""
    return {
        name: value
        for name, value in secrets.items()
        if os.environ.get(name) != value and not any(h in value for h in held)
    }


def resend(record_: JobRecord, resolved: Resolved, store: Store) -> None:
    """Send a job that was recorded but never sent (its submitter died, and the backend,
    asked, does not have it) under its own id: rendered again, its plan stored anew."""
    jobs = [(record_.split_id, record_.id)]
    batch = render(resolved, store, jobs, run_id=record_.run_id, recorded=True)
    store.set_plan(record_.id, batch.records[0].plan)
    send(batch, store)


def secrets_for(plan: Plan, values: dict[str, str]) -> dict[str, str]:
    """The value of every secret the plan names: from the job (`Backend.secret_values`),
    else from this process's environment (a retry rebuilds the job from the store, where
    secrets are masked) — never from disk."""
    out: dict[str, str] = {}
    for name in plan.secret_env:
        value = values.get(name, os.environ.get(name))
        if value is None:
            raise ConfigError(
                f"secret {name} has no value", key=name, fix=f"export {name}=... before submitting"
            )
        out[name] = value
    return out


def _attempts(store: Store, run_id: str | None, split_ids: list[int | None]) -> Counter[int | None]:
    """Jobs already recorded per split of the run: one query whatever the run's size."""
    if run_id is None:
        return Counter()
    if len(split_ids) == 1:
        return Counter({split_ids[0]: store.count_attempts(run_id, split_ids[0])})
    recorded = store.list(limit=None, run_id=run_id)
    done = Counter(r.split_id for r in recorded)
    for r in recorded:  # a job that made several attempts itself counts them all
        number = r.meta.get("attempt", 0)
        if isinstance(number, int) and number > done[r.split_id]:
            done[r.split_id] = number
    return done


def send(batch: Batch, store: Store, max_parallel: int = 8) -> None:
    """Send recorded jobs: one array submission, one submit, or up to `max_parallel`
    submits at a time (each thread with its own store connection). A job whose retry
    policy a controller on this host carries out gets its controller now, so its next
    attempt is made even when nothing of ours runs after this command."""
    try:
        _send(batch, store, max_parallel)
    finally:
        for record in batch.records:
            if record.native_id is not None and retries.at_send(record, batch.impl):
                retries.ensure(store.get(record.id), store)


def _send(batch: Batch, store: Store, max_parallel: int) -> None:
    impl, jobs = batch.impl, batch.jobs
    if not jobs:
        return
    _take_snapshot(batch, store)
    if batch.array and isinstance(impl, ArraySubmission):
        first = jobs[0]
        _settle(impl, batch.records, lambda: impl.submit_array(first.plan, first.secrets), store)
        return
    if len(jobs) == 1:
        _send_one(impl, jobs[0], store)
        return
    root = store.root

    def one(job: Planned) -> None:
        own = Store(root)  # a connection per thread: sqlite3 objects stay in their thread
        try:
            _send_one(impl, job, own)
        finally:
            own.close()

    # Imported here: concurrent.futures brings threading and logging, which a dry-run or a
    # `status` (both import this module through the API) never needs.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max(1, min(max_parallel, len(jobs)))) as pool:
        list(pool.map(one, jobs))


def _take_snapshot(batch: Batch, store: Store) -> None:
    """Copy the working folder into the first job's folder and record its hash with every
    job. The other jobs of the submission (a run's splits, each with a plan of its own)
    run from that one copy, as they would all run from the one working folder."""
    if batch.survey is None:
        return
    taken: Path | None = None
    try:
        for job in batch.jobs:
            if not job.plan.snapshot:
                continue
            dest = Path(job.plan.job_dir) / snapshot.FOLDER
            if taken is None:
                info = snapshot.take(batch.survey, dest)
                taken = dest
            elif dest != taken:
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.symlink_to(taken, target_is_directory=True)
    except OSError as exc:
        message = f"could not copy {batch.survey.folder} into the job's folder: {exc}"
        for record in batch.records:
            store.transition(record.id, State.FAILED, detail=f"submit failed: {message}")
            store.settle(record.id)
        raise BackendError(message) from exc
    if taken is None:
        return
    store.set_snapshot([job.record.id for job in batch.jobs], info)
    for job in batch.jobs:
        job.record.source = {**(job.record.source or _NO_GIT), "snapshot": info}


_NO_GIT: dict[str, Any] = {"repo": None, "commit": None, "branch": None, "dirty": None}


def _send_one(impl: Backend, job: Planned, store: Store) -> None:
    _settle(impl, [job.record], lambda: [impl.submit(job.plan, job.secrets)], store)


def _settle(
    impl: Backend,
    records: list[JobRecord],
    submit: Callable[[], Sequence[tuple[str, dict[str, Any]]]],
    store: Store,
) -> None:
    """Call the backend once for these recorded jobs and record what came of it: native
    ids; FAILED if refused (raised again); UNKNOWN if the answer was lost, for the polls
    to look for (`Backend.reconcile`)."""
    try:
        natives = submit()
    except SubmitOutcomeUnknown as exc:
        for record in records:
            store.mark_unknown(record.id, unknown_detail(exc))
            record.state = State.UNKNOWN
        return
    except Exception as exc:
        for record in records:
            store.transition(record.id, State.FAILED, detail=f"submit failed: {exc}")
            store.settle(record.id)
        if isinstance(exc, BackendError):
            raise
        raise BackendError(f"submit to {impl.name} failed: {exc}") from exc
    for record, (native_id, meta) in zip(records, natives, strict=True):
        store.set_native(record.id, native_id, meta)
        record.native_id = native_id
        record.meta = {**meta, "attempt": record.meta.get("attempt", 1)}
        honour_cancel(impl, record.id, store)


def unknown_detail(exc: SubmitOutcomeUnknown) -> str:
    return f"submitted, answer lost ({exc.message}); looking for the job on the backend"
