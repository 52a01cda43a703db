"""The detached process that carries out a job's retry policy on this host
(`python -m anylaunch.launch.controller JOB`), for backends whose jobs do not continue
themselves (local, Lepton, SkyPilot). A Slurm job requeues itself from inside its
allocation (backends/slurm/continuation.py); this controller is its backstop, for a
failure the job left as it ended, and acts only on an attempt with no decision recorded.

It holds the job in the store (`claim_keeper`: one live controller at most) and, each
time the job's current attempt has ended:

1. diagnoses that attempt (its own part of the logs, its own end) and asks the policy
   (`observe/diagnose/policy.py`) whether another attempt follows; the diagnosis and the
   answer are recorded on the attempt, the answer before anything is done about it;
2. ends the job with the attempt's state when none follows; otherwise, once the backoff
   has passed, opens the next attempt in the store (`begin_attempt`: refused if the job
   ended, was asked to cancel, or the attempt exists) and sends it, rendered afresh with
   ANYLAUNCH_ATTEMPT one higher, kept off the nodes diagnosis blamed where the backend
   can do that.

It keeps nothing in memory that the store does not have, so a controller killed at any
point is replaced by the next command that touches the job (`retries.ensure`), which
carries on where it stopped: an attempt opened but not sent is looked for on the backend
first (`Backend.reconcile`) and sent only if the backend does not have it, so no attempt
is ever sent twice.
"""

from __future__ import annotations

import os
import sys
import time

from anylaunch.backends.base import Backend, NoNodeLeft, get_backend
from anylaunch.errors import AnylaunchError, JobNotFound
from anylaunch.jobfile.spec import JobSpec
from anylaunch.launch import pipeline
from anylaunch.launch.resolve import resolve
from anylaunch.launch.retry import unmask
from anylaunch.observe import retries, watch
from anylaunch.observe.diagnose import policy
from anylaunch.store import Attempt, JobRecord, Store, this_process

POLL_S = float(os.environ.get("ANYLAUNCH_RETRY_POLL_S", "2"))


def main(job_id: str) -> int:
    store = Store()
    me = this_process()
    if not store.claim_keeper(job_id, me):
        print(f"job {job_id}: another controller holds it", flush=True)
        return 0
    print(f"job {job_id}: controller {me['pid']} started", flush=True)
    while True:
        if not store.path.exists():  # the store it works for was removed: nothing to do
            print(f"job {job_id}: {store.path} is gone; stopping", flush=True)
            return 0
        try:
            record = store.get(job_id)
            if record.state.terminal:
                print(f"job {job_id}: {record.state.value}", flush=True)
                return 0
            if not store.claim_keeper(job_id, me):  # taken over: leave it
                return 0
            busy = step(record, store)
        except JobNotFound:
            print(f"job {job_id}: not in {store.path}; stopping", flush=True)
            return 0
        except AnylaunchError as exc:  # a backend or the store did not answer: next time
            print(f"job {job_id}: {exc.message}", flush=True)
            busy = False
        if not busy:
            time.sleep(POLL_S)


def step(record: JobRecord, store: Store) -> bool:
    """One look at the job, and what it calls for; True when something was done that
    calls for another look at once."""
    impl = get_backend(record.backend)
    if record.native_id is None:
        return _unsent(record, impl, store)
    watch.refresh([record], store, {record.backend: impl})
    record = store.get(record.id)
    if record.state.terminal:
        return False
    current = store.attempts(record)[-1]
    if current.ended_at is None or current.number != retries.number(record):
        return False  # still running
    if current.diagnosis is None:
        _decide(record, current, impl, store)
        return True
    if current.next is None:  # decided already: no attempt follows
        _end(record, current, store)
        return True
    wait = current.ended_at + policy.backoff(retries.policy(record), current.number) - time.time()
    if wait > 0:
        time.sleep(min(wait, POLL_S))
        return True
    _send_next(record, current, impl, store)
    return True


def _decide(record: JobRecord, current: Attempt, impl: Backend, store: Store) -> None:
    """Diagnose the attempt that ended, and record what the policy makes of it."""
    job = watch.Job(record, store, impl)
    diagnosis = job.diagnose(current).to_json(record.id)
    hosts = impl.hosts(record)
    decision = policy.decide(
        retries.policy(record), current.number, diagnosis, hosts=hosts, avoided=current.avoided
    )
    why = decision.why
    blamed = policy.blamed_node(diagnosis, hosts)
    if blamed is not None and not impl.can_keep_off(record):
        why += f"; {record.backend} cannot keep this job off a node, so {blamed} may be used again"
    store.end_attempt(
        record.id,
        current.number,
        diagnosis=policy.summary(diagnosis, blamed),
        next_reason=why if decision.retry else None,
    )
    if not decision.retry:
        print(f"job {record.id}: attempt {current.number}: {why}", flush=True)
        store.transition(
            record.id,
            current.state or record.state,
            exit_code=current.exit_code,
            detail=f"attempt {current.number}: {diagnosis['code']}: {why}",
        )
    else:
        print(f"job {record.id}: attempt {current.number}: {why}", flush=True)


def _end(record: JobRecord, current: Attempt, store: Store) -> None:
    """The end decided before a crash: the job ends as its last attempt did."""
    code = (current.diagnosis or {}).get("code", "UNKNOWN")
    if current.state is not None:
        store.transition(
            record.id,
            current.state,
            exit_code=current.exit_code,
            detail=f"attempt {current.number}: {code}",
        )


def _spec(record: JobRecord, number: int) -> JobSpec:
    """The job's spec as stored (secrets put back from this environment) for attempt
    `number`."""
    data = dict(record.spec)
    data["env"] = {**data.get("env", {}), pipeline.ATTEMPT_ENV: str(number)}
    return JobSpec.model_validate(unmask(data, os.environ))


def _send_next(record: JobRecord, current: Attempt, impl: Backend, store: Store) -> None:
    """Open the next attempt in the store, then send it."""
    number = current.number + 1
    # Recorded as avoided only where the backend keeps the job off them.
    can = impl.can_keep_off(record)
    avoid = policy.next_avoided(current.avoided, current.diagnosis) if can else []
    resolved = resolve(_spec(record, number), impl)
    try:
        batch = pipeline.render(
            resolved, store, [(record.split_id, record.id)], run_id=record.run_id, avoid=avoid
        )
    except NoNodeLeft as exc:  # nowhere to go: the job ends as its last attempt did
        print(f"job {record.id}: attempt {number} not sent: {exc.message}", flush=True)
        if current.state is not None:
            detail = f"attempt {current.number}: attempt {number} not sent: {exc.message}"
            store.transition(record.id, current.state, exit_code=current.exit_code, detail=detail)
        return
    plan = batch.records[0].plan
    detail = f"attempt {number}: {current.next}"
    if not store.begin_attempt(record.id, number, plan, avoided=avoid, detail=detail):
        return  # ended, cancelled or already begun meanwhile: the store said no
    print(f"job {record.id}: sending attempt {number}", flush=True)
    pipeline.send(batch, store)


def _unsent(record: JobRecord, impl: Backend, store: Store) -> bool:
    """An attempt opened but not sent (this or a dead controller crashed before the send
    was recorded): adopted if the backend has it, else sent now."""
    if not store.claim(record.id):
        return False  # a live process is sending it
    record = store.get(record.id)
    found = watch.reconcile(impl, [record], store)
    if not found:  # adopted (or the backend could not tell: ask again later)
        return False
    number = retries.number(record)
    resolved = resolve(_spec(record, number), impl)
    attempts = store.attempts(record)
    avoid = attempts[-1].avoided if attempts else []
    batch = pipeline.render(
        resolved,
        store,
        [(record.split_id, record.id)],
        run_id=record.run_id,
        recorded=True,
        avoid=avoid if impl.can_keep_off(record) else (),
    )
    store.set_plan(record.id, batch.records[0].plan)
    print(f"job {record.id}: sending attempt {number} (after a crash)", flush=True)
    pipeline.send(batch, store)
    return True


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
