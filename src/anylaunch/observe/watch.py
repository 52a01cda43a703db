"""The watch stage: a handle on a submitted job, and the polls that keep the store true.

Status of many jobs is one backend call per backend (`refresh`); a job recorded without a
native id whose submitter died is looked up on its backend first (`reconcile`), and every
reader of logs asks here where each node's log is (`log_sources`). Nothing here reads a
job file or renders a plan, so `ps`, `status` and `logs` never import the job file's
models.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from anylaunch.backends.base import Backend, LogSource, Observation, get_backend
from anylaunch.errors import AnylaunchError, UsageError
from anylaunch.jobfile.secrets import secret_values
from anylaunch.observe import logfile, notify, pending, reachability, retries
from anylaunch.observe.reachability import Unreachable
from anylaunch.state import State
from anylaunch.store import Attempt, JobRecord, Store, Update, busy_elsewhere, private

if TYPE_CHECKING:
    from anylaunch.observe.diagnose.engine import Diagnosis


def reconcile(
    impl: Backend,
    records: Sequence[JobRecord],
    store: Store,
    unsent_update: Callable[[JobRecord], Update] | None = None,
) -> list[JobRecord]:
    """Jobs recorded without a native id whose submitter died: ask the backend for them.

    The crash-consistency rule: a job is recorded (PENDING, with its submitter) before it
    is submitted, so after a crash every job is in the store, and the only doubt is
    whether the backend got it. The backend answers from its own records (`reconcile`:
    Slurm by the script's `--comment`, Lepton by the job name, local by the supervisor
    process). Found jobs get their native id; the rest are returned, claimed by this
    process: never submitted, so submitting them cannot make a second job. A backend
    that cannot tell keeps its jobs out of both lists (never guessed).

    Like a poll, the answer is written in one transaction (`Store.apply`): the found
    jobs' native ids, and what `unsent_update` says of each job the backend lacks.
    """
    orphans = [
        r
        for r in records
        if r.native_id is None and (not r.state.terminal or "submitter" in r.meta)
    ]
    orphans = [store.get(r.id) for r in orphans if store.claim(r.id)]
    if not orphans:
        return []
    try:
        found = impl.reconcile(orphans)
    except AnylaunchError:
        return []  # the backend did not answer: ask again at the next poll, guess nothing
    if found is None:  # the backend cannot tell: neither adopted nor sent again
        return []
    updates, adopted, unsent = [], [], []
    for record in orphans:
        if record.id in found:
            native_id, meta = found[record.id]
            updates.append(_adopted(record, native_id or "", meta))
            record.native_id, record.meta = native_id or "", meta
            adopted.append(record)
        else:
            unsent.append(record)
            if unsent_update is not None:
                updates.append(unsent_update(record))
    store.apply(updates)
    if adopted:
        for record in adopted:
            honour_cancel(impl, record.id, store)
    return unsent


def _adopted(record: JobRecord, native_id: str, meta: dict[str, Any]) -> Update:
    """A job the backend has after all: its native id and metadata (and, for a job whose
    submit's answer was lost, a detail saying where it was found)."""
    found_detail = f"found on {record.backend} as {native_id}"
    detail = found_detail if record.state is State.UNKNOWN and native_id else None
    return Update(record.id, native_id=native_id, meta=meta, detail=detail)


def get(job_id: str, *, store: Store | None = None, backend: Backend | None = None) -> Job:
    """A recorded job; `backend`, when given, is the one its cancel goes through."""
    store = store or Store()
    return Job(store.get(job_id), store, backend)


def refresh(
    records: Sequence[JobRecord], store: Store, built: Mapping[str, Backend] | None = None
) -> list[JobRecord]:
    """Poll every live job with one backend call per backend; terminal jobs are never polled.

    Backends only report what they see (`Observation`); what they saw is written here,
    each backend's poll in one transaction (`Store.apply`), and `records` are updated
    to what was stored.
    """
    live: dict[str, list[JobRecord]] = {}
    for record in records:
        if not record.state.terminal:
            live.setdefault(record.backend, []).append(record)
    for backend, jobs in live.items():
        impl = (built or {}).get(backend) or get_backend(backend)
        orphans = [
            j for j in jobs if j.native_id is None and not busy_elsewhere(j.meta.get("submitter"))
        ]
        # While the controller is known not to answer, looking for orphans would only wait
        # for it once more: they are looked for after a poll that got an answer.
        if orphans and reachability.note(store.root, backend) is None:
            reconcile(impl, orphans, store, functools.partial(_unsent, impl=impl, store=store))
            for job in orphans:  # adopted (a native id now) or settled: poll what is stored
                vars(job).update(vars(store.get(job.id)))
            jobs = [j for j in jobs if not j.state.terminal]
        store.load_blobs(jobs)  # a poll may need the plan (a resubmission's body)
        again = _poll_and_apply(impl, backend, jobs, store)
        if again:  # claimed in the store just now: this process makes the change
            _poll_and_apply(impl, backend, again, store)
    # Ended jobs not yet announced (`notify:`): those that ended in this poll, and those
    # that ended while nothing of ours watched them.
    notify.announce(store, records, lambda r: Job(r, store).diagnose())
    return list(records)


def _poll_and_apply(
    impl: Backend, backend: str, jobs: Sequence[JobRecord], store: Store
) -> list[JobRecord]:
    """One poll of `jobs`, written in one transaction; returns the jobs to poll again."""
    try:
        observed = impl.poll(jobs)
    except Unreachable as exc:
        observed = exc.observed
        note = reachability.down(store.root, backend, exc.message)
        for job in jobs:
            if job.id not in observed:
                job.stale = note
    else:
        reachability.up(store.root, backend)
    now = time.time()
    observed = _attempt_ends(impl, jobs, observed, store)
    stored = store.apply(
        [_update(job, observed[job.id], now) for job in jobs if job.id in observed]
    )
    again = []
    for job in jobs:
        after = stored.get(job.id)
        if after is None:
            continue
        for name in ("state", "exit_code", "detail", "native_id", "meta", "updated_at"):
            setattr(job, name, getattr(after, name))
        seen = observed[job.id]
        if seen.again and seen.native_id is not None and after.native_id == seen.native_id:
            again.append(job)
    return again


def _attempt_ends(
    impl: Backend, jobs: Sequence[JobRecord], observed: dict[str, Observation], store: Store
) -> dict[str, Observation]:
    """The observations to write: an attempt's end, for a job whose controller decides
    what follows it (`retries.kept`), is written on the attempt alone, and the
    controller is started if none is alive (the next command that touches the job
    carries on after a crash)."""
    out = dict(observed)
    for job in jobs:
        seen = observed.get(job.id)
        if seen is None or not seen.state.terminal or seen.state is State.SUCCEEDED:
            continue  # success ends the job whatever its policy
        if not retries.kept(job, impl):
            continue
        del out[job.id]
        if seen.attempts:
            # The attempts a job made of itself come first: the one that ended is its
            # newest, never one it already continued past.
            store.apply([Update(job.id, attempts=tuple(dict(a) for a in seen.attempts))])
            job = store.get(job.id)
        number = retries.number(job)
        detail = retries.ended_detail(number, seen.state.value, seen.exit_code)
        store.attempt_ended(job.id, number, seen.state, seen.exit_code, detail)
        retries.ensure(store.get(job.id), store)
    return out


def _update(job: JobRecord, seen: Observation, now: float) -> Update:
    detail = seen.detail
    if seen.state is State.PENDING:
        detail = pending.explain(detail, now - job.created_at)
    return Update(
        job.id,
        seen.state,
        seen.exit_code,
        detail,
        final=seen.final,
        native_id=seen.native_id,
        expected_native_id=seen.expected_native_id,
        meta=dict(seen.meta) if seen.meta is not None else None,
        events=seen.events,
        attempt=seen.attempt,
        ended_as=seen.ended_as,
        attempts=tuple(dict(a) for a in seen.attempts),
    )


def _unsent(record: JobRecord, *, impl: Backend, store: Store) -> Update:
    """A job its submitter never handed to the backend: a later attempt of a job whose
    controller makes its attempts is the controller's to send (started if none runs);
    anything else is `_never_submitted`."""
    if retries.number(record) > 1 and retries.kept(record, impl):
        retries.ensure(record, store)
        number = retries.number(record)
        return Update(record.id, detail=f"attempt {number} not sent yet: its controller sends it")
    return _never_submitted(record)


NOT_SUBMITTED = "not submitted: the process submitting it ended first"
NOT_FOUND = "not submitted: the submit's answer was lost and the backend has no such job"


def _never_submitted(record: JobRecord) -> Update:
    """A job its dead submitter never handed to the backend: a lone job failed; a split
    waits for its run to be resumed (the same command again, or `retry RUN --failed`).
    A job whose submit's answer was lost lands here once the backend, asked, has no
    such job. A job that ends here is settled: no submitter is left to wait for."""
    why = NOT_FOUND if record.state is State.UNKNOWN else NOT_SUBMITTED
    settled = {k: v for k, v in record.meta.items() if k != "submitter"}
    if record.cancel_requested_at:
        return Update(record.id, State.CANCELLED, detail=f"cancelled; {why}", meta=settled)
    if record.run_id is None:
        return Update(record.id, State.FAILED, detail=f"{why} — run it again", meta=settled)
    return Update(
        record.id,
        detail=f"{why} — run the same command again, or: anylaunch retry {record.run_id} --failed",
    )


class Job:
    """A submitted job: a handle on its row in the store and on its backend."""

    def __init__(self, record: JobRecord, store: Store, backend: Backend | None = None) -> None:
        self.record = record
        self._store = store
        self._backend = backend  # built by the caller (own credentials); else by name

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def backend(self) -> str:
        return self.record.backend

    def __repr__(self) -> str:
        return f"Job(id={self.id!r}, backend={self.backend!r}, state={self.record.state.value!r})"

    def _reload(self) -> JobRecord:
        self.record = self._store.get(self.id)
        return self.record

    def status(self) -> State:
        """The current state, polling the backend if the job is still live."""
        record = self._reload()
        # An ended job is not polled, but its end may not be announced yet (`refresh`).
        refresh([record], self._store, {self.backend: self._backend} if self._backend else None)
        stale = record.stale
        record = self._reload()
        record.stale = stale
        return record.state

    def wait(self, timeout: float | None = None, poll_interval: float = 0.5) -> State:
        """Block until the job is terminal (or `timeout` seconds pass); return its state."""
        deadline = None if timeout is None else time.monotonic() + timeout
        interval = min(poll_interval, 0.2)
        while True:
            state = self.status()
            if state.terminal or self.settled_unknown():
                return state
            if deadline is not None and time.monotonic() >= deadline:
                return state
            time.sleep(interval)
            interval = min(interval * 1.5, poll_interval)  # quick for short jobs, gentle later

    def settled_unknown(self) -> bool:
        """UNKNOWN for good: nothing will tell how the job ended (its detail says why);
        `cancel` still settles it as CANCELLED."""
        return self.record.unknown_for_good

    def logs(self, node: int | None = None, tail: int | None = None) -> str:
        """The job's output so far, secrets masked; several nodes are prefixed `[node N]`."""
        read = self._read_logs(self._reload(), node, tail)
        chunks = []
        for source_node, lines in read:
            chunks += [f"[node {source_node}] {line}" for line in lines] if len(read) > 1 else lines
        return "\n".join(chunks) + ("\n" if chunks else "")

    def _read_logs(
        self, record: JobRecord, node: int | None, tail: int | None
    ) -> list[tuple[int, list[str]]]:
        """(node, masked lines) of each node's whole log, or of the one `node`."""
        secrets = self.secrets()
        out = []
        for source in log_sources(record, node):
            lines = logfile.read(source, record.job_dir).lines
            if tail is not None:
                lines = lines[-tail:] if tail > 0 else []
            out.append((source.node, logfile.masked(lines, secrets)))
        return out

    def secrets(self) -> set[str]:
        """Values to mask in what this job printed: the secrets its plan names and every
        secret-looking variable of this process's environment (where they came from), and
        those its text wrote literally (kept for its owner by `private.keep_secrets`)."""
        kept = private.kept_secrets(self._store.root, self.id)
        return secret_values(self.record.plan.get("secret_env", [])) | secret_values(kept, kept)

    def cancel(self) -> State:
        """Record the intent, stop the job on its backend, and return the final state."""
        record = self._reload()
        if record.state.terminal:
            return record.state
        self._store.request_cancel(self.id)
        impl = self._backend or get_backend(self.backend)
        record = self._reload()
        if record.native_id is None:
            # Being submitted by a live process (which stops it once submitted, see
            # `send`), or an orphan of a crash: settled by `refresh`.
            return self.status()
        impl.cancel(record)
        return self.status()

    def events(self) -> list[dict[str, Any]]:
        return self._store.events(self.id)

    def notifications(self) -> list[dict[str, Any]]:
        """Each `notify:` target's announcement of the job's end, as the store has it."""
        return [
            {"id": f"{self.id}/notify/{n.pop('target')}", "kind": "notification", **n}
            for n in self._store.notifications(self.id)
        ]

    def diagnose(self, attempt: Attempt | None = None, *, detail: str | None = None) -> Diagnosis:
        """Why the job failed (or is failing): from its state, exit code, backend events
        and the logs of every node. With `attempt` (one of `attempts()`, ended): why that
        attempt ended, from its own part of the logs and its own end; `detail` is the
        backend's word for that end."""
        # The rules compile hundreds of patterns: `ps` and `status` do not pay for them.
        from anylaunch.observe.diagnose.engine import diagnose_lines
        from anylaunch.observe.diagnose.lines import attempt_lines, parse

        record = self._reload()
        first = self.attempts()[0].number if attempt is not None else 1
        lines = []
        for node, node_lines in self._read_logs(record, None, None):
            if attempt is not None:
                node_lines = attempt_lines(node_lines, attempt.number, first)
            lines += parse("\n".join(node_lines), node=node)
        state: str | None = record.state.value
        exit_code = record.exit_code
        if attempt is None:
            detail = record.detail
        else:
            state = attempt.state.value if attempt.state else None
            exit_code = attempt.exit_code
        events = [detail] if detail else []  # the backend's word for the end
        events += get_backend(self.backend).native_signals(record)
        return diagnose_lines(
            lines,
            state=state,
            exit_code=exit_code,
            cancel_requested=record.cancel_requested_at is not None,
            events=events,
        )

    def attempts(self) -> list[Attempt]:
        """Every attempt of the job, oldest first. Read from the store without replacing
        `record`, which carries what the last poll saw (its stale mark)."""
        return self._store.attempts(self._store.get(self.id))


def log_sources(record: JobRecord, node: int | None = None) -> list[LogSource]:
    """Where each node's log is (or `node`'s alone): every reader of logs asks here.

    A node outside the job is a usage error, found from the plan before the backend is
    asked for anything. Plans recorded before they carried their node count are
    checked against the logs the backend lists instead.
    """
    nodes = record.plan.get("nodes")
    if node is not None and isinstance(nodes, int) and not 0 <= node < nodes:
        raise _no_such_node(record, node, nodes)
    sources = list(get_backend(record.backend).logs(record))
    if node is None:
        return sources
    picked = [s for s in sources if s.node == node]
    if not picked:
        raise _no_such_node(record, node, len(sources))
    return picked


def _no_such_node(record: JobRecord, node: int, nodes: int) -> UsageError:
    if nodes <= 1:
        return UsageError(f"job {record.id} has one node (0), not {node} — use --node 0")
    last = nodes - 1
    return UsageError(f"job {record.id} has nodes 0..{last}, not {node} — use --node 0..{last}")


def jobs(
    *,
    store: Store | None = None,
    limit: int | None = 50,
    states: Iterable[State] = (),
    backend: str | None = None,
) -> list[JobRecord]:
    store = store or Store()
    return refresh(store.list(limit=limit, states=tuple(states), backend=backend), store)


def honour_cancel(impl: Backend, job_id: str, store: Store) -> None:
    """A cancel asked while the submit was in flight had no native id to stop: stop it now."""
    record = store.get(job_id)
    if record.cancel_requested_at and not record.state.terminal:
        impl.cancel(record)
