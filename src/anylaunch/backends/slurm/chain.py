"""A graph of steps handed to Slurm at once, each waiting on the steps it needs with
Slurm's own `--dependency=afterok`: once `submit` returns, nothing on the submitting host
has to stay up for the graph to finish. This is how the Slurm backend implements
`ChainSubmission` (a workflow whose steps all run on Slurm is handed over this way).

A step is one job, or a split step: one array job (`--array`) whose tasks are the
splits. `afterok` on an array's job id waits for every task of it to succeed.

What Slurm does when a step fails (slurmctld's job_scheduler.c and job_mgr.c, 22.05):
- A job whose `afterok` can no longer be met stays PENDING for ever with reason
  DependencyNeverSatisfied, unless `--kill-on-invalid-dep=yes` (or the cluster's
  `kill_invalid_depend`): then slurmctld cancels it. Every step here is submitted with
  `--kill-on-invalid-dep=yes`, so a failure cancels the steps after it, which cancels
  the steps after those.
- A dependency on a job slurmctld has already forgotten (MinJobAge after it ended) is
  lifted, whatever that job's outcome was. So a dependency is only ever put on a job
  seen live: an earlier step that succeeded needs no dependency, one that failed keeps
  the steps after it from being submitted at all, and an earlier step submitted by
  another process is asked of squeue first.

Each step goes through the stages of every launch: resolved once (its spec with the
dependency), then rendered, recorded and sent by `pipeline.submit`, or `splits.launch`
for a split step. Crash consistency is the store's, step by step: a step's jobs are
recorded before its sbatch, and a step counts as started once it has jobs.
After a crash the same `submit` again adopts what Slurm has (`watch.reconcile`, by the
script's `--comment`), submits under their recorded ids the jobs it does not have, and
starts the steps that had not started; a lock file makes sure one process at a time
does that for a graph.
"""

from __future__ import annotations

import fcntl
import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from anylaunch.backends.base import Backend, ChainStep, OnStart
from anylaunch.backends.slurm import commands
from anylaunch.backends.slurm.config import SlurmSection
from anylaunch.errors import ConfigError, UsageError
from anylaunch.observe import watch
from anylaunch.state import State
from anylaunch.store import JobRecord, Store, busy_elsewhere

if TYPE_CHECKING:
    from anylaunch.backends.slurm.login import Login
    from anylaunch.jobfile.spec import JobSpec

BACKEND = "slurm"  # the backend the steps run on, unless the caller hands its own
KILL_ON_INVALID_DEP = "--kill-on-invalid-dep=yes"


@dataclass(frozen=True)
class Gate:
    """Whether a step can be handed to Slurm now, and on which jobs it then waits."""

    after: tuple[str, ...] = ()  # Slurm job ids for afterok
    blocked: str | None = None  # a step it needs failed: it cannot run without a retry
    waiting: str | None = None  # a step it needs has no Slurm id yet (or Slurm forgot it)


@dataclass
class StepStatus:
    id: str
    state: State
    detail: str | None = None
    jobs: list[JobRecord] = field(default_factory=list)  # latest attempt of each split

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "state": self.state.value,
            "detail": self.detail,
            "jobs": [j.summary() for j in self.jobs],
        }


def with_dependency(spec: JobSpec, after: Sequence[str]) -> JobSpec:
    """The spec submitted with `--dependency=afterok:<ids>` (and the job's own
    dependency, if it has one), killed by Slurm if the dependency can never be met."""
    if not after:
        return spec
    section = spec.slurm or SlurmSection()
    dependency = "afterok:" + ":".join(after)
    if section.dependency:
        if "?" in section.dependency:
            raise ConfigError(
                "a step that needs other steps cannot have an any-of ('?') dependency",
                file=spec.source,
                key="slurm.dependency",
                fix="join dependencies with ',' (all must be met), or drop the step's needs",
            )
        dependency += "," + section.dependency
    lines = [*section.sbatch_lines, KILL_ON_INVALID_DEP]
    section = section.model_copy(update={"dependency": dependency, "sbatch_lines": lines})
    return spec.with_section("slurm", section)


def order(steps: Sequence[ChainStep]) -> list[ChainStep]:
    """The steps, each after every step it needs; unknown needs and cycles are errors."""
    by_id = {s.id: s for s in steps}
    for step in steps:
        for need in step.needs:
            if need not in by_id:
                raise UsageError(f"step '{step.id}' needs '{need}', which is not a step")
    done: list[ChainStep] = []
    seen: set[str] = set()
    while len(done) < len(steps):
        ready = [s for s in steps if s.id not in seen and all(n in seen for n in s.needs)]
        if not ready:
            left = ", ".join(s.id for s in steps if s.id not in seen)
            raise UsageError(f"the steps {left} need each other in a cycle")
        for step in ready:
            done.append(step)
            seen.add(step.id)
    return done


def latest(records: Sequence[JobRecord]) -> dict[int, JobRecord]:
    """Each split's newest attempt (a step that is one job: key 0)."""
    newest: dict[int, JobRecord] = {}
    for record in sorted(records, key=lambda r: r.created_at):
        newest[record.split_id if record.split_id is not None else 0] = record
    return newest


def state_of(records: Sequence[JobRecord]) -> State | None:
    """A step's state from its jobs; None when it has none (not started)."""
    states = [r.state for r in latest(records).values()]
    if not states:
        return None
    if all(s is State.SUCCEEDED for s in states):
        return State.SUCCEEDED
    if not all(s.terminal for s in states):
        return State.RUNNING if any(s is State.RUNNING for s in states) else State.PENDING
    if all(s in (State.SUCCEEDED, State.CANCELLED) for s in states):
        return State.CANCELLED
    return State.FAILED


def gate(needs: Sequence[str], records: dict[str, list[JobRecord]]) -> Gate:
    """Pure: from the jobs of the steps it needs, whether a step can be submitted now."""
    after: list[str] = []
    for need in needs:
        jobs = records.get(need, [])
        state = state_of(jobs)
        if state is None:
            return Gate(waiting=f"needs {need}, which is not submitted yet")
        if state is State.SUCCEEDED:
            continue  # nothing to wait for: Slurm may have forgotten it already
        ended = [r.state for r in latest(jobs).values() if r.state.terminal]
        bad = next((s for s in ended if s is not State.SUCCEEDED), None)
        if bad is not None:  # afterok on the rest would let this step run after a failure
            return Gate(blocked=f"needs {need}, which {state_word(bad)}")
        ids = waits_on(jobs)
        if ids is None:
            return Gate(waiting=f"needs {need}, whose Slurm job id is not known yet")
        after += ids
    return Gate(after=tuple(dict.fromkeys(after)))


def waits_on(records: Sequence[JobRecord]) -> list[str] | None:
    """The Slurm ids that stand for a step's live jobs: an array's job id when every
    task of that array is a split's newest attempt, else the live tasks one by one (an
    array holding a failed task that was retried elsewhere would fail `afterok` on the
    whole array). None when a live job has no Slurm id yet."""
    newest = latest(records)
    current = {r.id for r in newest.values()}
    ids: list[str] = []
    for record in newest.values():
        if record.state.terminal:
            continue
        if not record.native_id:
            return None
        array = record.meta.get("array_job_id")
        whole = array and all(
            r.id in current for r in records if r.meta.get("array_job_id") == array
        )
        ids.append(str(array) if whole else record.native_id)
    return list(dict.fromkeys(ids))


def state_word(state: State) -> str:
    return {State.CANCELLED: "was cancelled", State.TIMEOUT: "timed out"}.get(
        state, f"{state.value.lower()}"
    )


def submit(
    steps: Sequence[ChainStep],
    store: Store | None = None,
    *,
    on_start: OnStart | None = None,
    check: bool = True,
    backend: Backend | str = BACKEND,
) -> dict[str, Gate]:
    """Hand every step to Slurm, in dependency order, each waiting (`afterok`) on the
    jobs of the steps it needs; return at once. Steps already started are not started
    again (their unsent jobs are sent), so calling it again after a crash finishes the
    submission. Returns the gate of each step not submitted now: blocked or waiting.

    A split step is one array job (`--array`), its tasks the splits. `on_start(step)`
    runs before a step's first jobs are recorded (a workflow writes its step row there);
    `check` runs every step's quick preflight checks first."""
    store = store or Store()
    ordered = order(steps)
    _cluster(ordered)
    if check:
        _preflight(ordered, backend)
    with _locked(store, ordered):
        return _advance(ordered, store, backend, redo=set(), on_start=on_start)


def retry_failed(
    steps: Sequence[ChainStep],
    store: Store | None = None,
    *,
    on_start: OnStart | None = None,
    backend: Backend | str = BACKEND,
) -> dict[str, list[int]]:
    """Resubmit the failed splits of each failed step (a step that is one job: the job)
    and every step after them that did not succeed, each waiting on the new jobs of the
    steps it needs. A step that succeeded is never rerun. Returns {step: split ids
    resubmitted} ([] for a step that is one job)."""
    store = store or Store()
    ordered = order(steps)
    with _locked(store, ordered):
        records = _refresh(ordered, store)
        failed = {
            s.id
            for s in ordered
            if state_of(records[s.id]) in (State.FAILED, State.CANCELLED)
            or (state_of(records[s.id]) is None and gate(s.needs, records).blocked)
        }
        redo = _after(ordered, failed) | failed
        _cancel_waiting(ordered, redo - failed, records, store)
        before = {s.id: len(records[s.id]) for s in ordered}
        _advance(ordered, store, backend, redo=redo, on_start=on_start)
        done: dict[str, list[int]] = {}
        for step in ordered:
            new = sorted(store.list(limit=None, run_id=step.run_id), key=lambda r: r.created_at)
            if len(new) > before[step.id]:
                added = new[before[step.id] :]
                done[step.id] = [] if step.split_ids is None else [r.split_id or 0 for r in added]
        return done


def status(steps: Sequence[ChainStep], store: Store | None = None) -> list[StepStatus]:
    """Each step's state (its live jobs polled first, one squeue for all), saying why a
    step did not run."""
    store = store or Store()
    ordered = order(steps)
    records = _refresh(ordered, store)
    out: list[StepStatus] = []
    for step in ordered:
        jobs = records[step.id]
        state = state_of(jobs)
        detail = None
        if state is None:
            g = gate(step.needs, records)
            state = State.CANCELLED if g.blocked else State.PENDING
            detail = f"not submitted: {g.blocked or g.waiting}"
        elif state is State.CANCELLED and not any(j.cancel_requested_at for j in jobs):
            why = next(
                (
                    f"needs {n}, which {state_word(s)}"
                    for n in step.needs
                    if (s := state_of(records[n])) in (State.FAILED, State.CANCELLED)
                ),
                None,
            )
            detail = f"never ran: {why} (Slurm cancelled it)" if why else None
        elif state is State.FAILED:
            bad = [j for j in latest(jobs).values() if j.state is not State.SUCCEEDED]
            detail = "; ".join(
                f"{'split ' + str(j.split_id) + ' ' if j.split_id is not None else ''}"
                f"{j.state.value.lower()}"
                + (f" (exit {j.exit_code})" if j.exit_code is not None else "")
                for j in bad
            )
        out.append(StepStatus(step.id, state, detail, list(latest(jobs).values())))
    return out


# -- the work ---------------------------------------------------------------------------


def _advance(
    ordered: list[ChainStep],
    store: Store,
    backend: Backend | str,
    *,
    redo: set[str],
    on_start: OnStart | None,
) -> dict[str, Gate]:
    records = _refresh(ordered, store)
    submitted_now: set[str] = set()  # Slurm ids sent by this call: known to slurmctld
    held: dict[str, Gate] = {}
    for step in ordered:
        jobs = records[step.id]
        if jobs and step.id not in redo:
            _send_unsent(step, jobs, records, store, submitted_now, backend)
        else:
            todo = _todo(step, jobs)
            if todo == []:
                continue
            g = gate(step.needs, records)
            g = _known(g, submitted_now, _cluster(ordered))
            if g.blocked or g.waiting:
                held[step.id] = g
                continue
            if not jobs and on_start is not None:
                on_start(step)
            _start(step, g.after, todo, store, backend)
        before = _slurm_ids(jobs)
        records[step.id] = sorted(
            store.list(limit=None, run_id=step.run_id), key=lambda r: r.created_at
        )
        submitted_now |= _slurm_ids(records[step.id]) - before
    return held


def _slurm_ids(jobs: Sequence[JobRecord]) -> set[str]:
    """Every Slurm id the jobs go by: their own and their arrays'."""
    ids = {j.native_id for j in jobs if j.native_id}
    return ids | {str(j.meta["array_job_id"]) for j in jobs if "array_job_id" in j.meta}


def _todo(step: ChainStep, jobs: list[JobRecord]) -> list[int] | None:
    """Splits to (re)submit: all for a step not started, else those whose newest attempt
    ended without success; None: the whole one-job step; []: nothing."""
    if not jobs:
        return step.split_ids
    ended = [
        i for i, r in latest(jobs).items() if r.state.terminal and r.state is not State.SUCCEEDED
    ]
    if step.split_ids is None:
        return None if ended else []
    return ended


def _start(
    step: ChainStep,
    after: Sequence[str],
    splits_: list[int] | None,
    store: Store,
    backend: Backend | str,
) -> None:
    """Submit a step (or `splits_` of it) waiting on `after`: resolved once, with its
    dependency, then through the pipeline like any job (the graph was checked whole)."""
    from anylaunch.launch import pipeline, splits
    from anylaunch.launch.resolve import resolve

    job = resolve(with_dependency(step.spec, after), backend)
    if splits_ is None:
        pipeline.submit(job, store, run_id=step.run_id)
    else:
        splits.launch(job, splits_, store=store, run_id=step.run_id, check=False)


def _send_unsent(
    step: ChainStep,
    jobs: list[JobRecord],
    records: dict[str, list[JobRecord]],
    store: Store,
    submitted_now: set[str],
    backend: Backend | str,
) -> None:
    """A started step's jobs recorded by a process that died before sending them, and
    that Slurm does not have (the poll asked it by comment): send them under their ids."""
    todo = [
        r
        for r in latest(jobs).values()
        if r.native_id is None
        and (not r.state.terminal or "submitter" in r.meta)
        and not busy_elsewhere(r.meta.get("submitter"))
    ]
    if not todo:
        return
    g = _known(gate(step.needs, records), submitted_now, _cluster([step]))
    if g.blocked or g.waiting:
        return
    from anylaunch.launch import pipeline, splits
    from anylaunch.launch.resolve import resolve

    job = resolve(with_dependency(step.spec, g.after), backend)
    if step.split_ids is not None:
        splits.resume(step.run_id, job, store=store)
        return
    for record in watch.reconcile(job.impl, todo, store):
        pipeline.resend(record, job, store)


def _known(g: Gate, submitted_now: set[str], via: Login | None) -> Gate:
    """Wait rather than depend on a job slurmctld no longer knows (it would lift the
    dependency whatever that job's outcome): ids from earlier processes are checked."""
    older = [i for i in g.after if i not in submitted_now]
    if not older or g.blocked or g.waiting:
        return g
    seen = commands.squeue([i.split("_")[0] for i in older], via=via)
    bases = {n.split("_")[0] for n in seen} | set(seen)
    missing = [i for i in older if i not in seen and i.split("_")[0] not in bases]
    if missing:
        return Gate(waiting=f"Slurm no longer lists job {missing[0]}: its outcome is looked up")
    return g


def _cluster(steps: Sequence[ChainStep]) -> Login | None:
    """The one cluster the steps run on (its login node; None: this machine's Slurm).
    `afterok` names jobs of one slurmctld: steps on two clusters cannot wait on each
    other that way."""
    from anylaunch.backends.slurm.cluster import login_of

    found = {login_of(step.spec) for step in steps}
    if len(found) > 1:
        names = ", ".join(sorted(v.text if v else "this machine" for v in found))
        raise UsageError(
            f"the steps run on different Slurm clusters ({names}): Slurm's afterok cannot"
            " wait across them — give every step the same slurm.login"
        )
    return found.pop() if found else None


def _cancel_waiting(
    ordered: list[ChainStep], steps: set[str], records: dict[str, list[JobRecord]], store: Store
) -> None:
    """Steps after a failed one that still wait in the queue: slurmctld is about to
    cancel them (their afterok failed); cancel them now so the retry resubmits them."""
    for step in ordered:
        if step.id not in steps:
            continue
        for record in latest(records[step.id]).values():
            if record.state is State.PENDING and record.native_id:
                watch.get(record.id, store=store).cancel()
        records[step.id] = store.list(limit=None, run_id=step.run_id)


def _after(ordered: list[ChainStep], roots: set[str]) -> set[str]:
    """Every step that needs one of `roots`, directly or through others."""
    out: set[str] = set()
    for step in ordered:  # dependency order: a step's needs are decided before it
        if any(n in roots or n in out for n in step.needs):
            out.add(step.id)
    return out


def _refresh(ordered: list[ChainStep], store: Store) -> dict[str, list[JobRecord]]:
    """Every step's jobs, the live ones polled (one squeue for the whole graph)."""
    jobs: list[JobRecord] = []
    for step in ordered:
        jobs += store.list(limit=None, run_id=step.run_id)
    watch.refresh(jobs, store)
    by_run: dict[str, list[JobRecord]] = {s.run_id: [] for s in ordered}
    for job in sorted(jobs, key=lambda r: r.created_at):
        by_run[job.run_id or ""].append(job)
    return {s.id: by_run[s.run_id] for s in ordered}


def _preflight(ordered: list[ChainStep], backend: Backend | str) -> None:
    """Every step's quick checks before the first sbatch: a graph is sent whole or not."""
    from anylaunch.launch import pipeline
    from anylaunch.launch.resolve import resolve

    for step in ordered:
        pipeline.check(resolve(step.spec, backend))


@contextmanager
def _locked(store: Store, ordered: list[ChainStep]) -> Iterator[None]:
    """One process at a time submits (or resumes, or retries) a graph; the lock goes
    with the process, so a SIGKILLed submitter never leaves it held."""
    name = hashlib.sha256("\n".join(s.run_id for s in ordered).encode()).hexdigest()[:16]
    path = store.root / "locks" / f"chain-{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
