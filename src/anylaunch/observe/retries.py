"""A job's retry policy carried out on this host: which jobs a controller keeps, what a
poll does when one of their attempts ends, and starting the controller.

A job with `retry: {max_attempts: N > 1}` has a controller (started when the job is
sent; on a backend whose jobs continue themselves from inside their allocation,
Slurm's `Capabilities.continues_in_job`, only once the job ends in a failure it did
not continue past): a detached
process (`python -m anylaunch.launch.controller JOB`) that holds the job in the store, and at the end of each attempt diagnoses it, records the
diagnosis, and either makes the next attempt or ends the job. A poll by any other
process that sees an attempt end records that end on the attempt, never on the job (the
job's end is the controller's to decide), and starts the controller if none is alive:
so the next command that touches the job carries on after a crash.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any

from anylaunch.store import alive, private
from anylaunch.store.attempts import current_number

if TYPE_CHECKING:
    from anylaunch.backends.base import Backend
    from anylaunch.store import JobRecord, Store

CONTROLLER = "anylaunch.launch.controller"


def policy(record: JobRecord) -> dict[str, Any]:
    """The job's retry policy as stored with its spec ({} when it has none)."""
    found = record.spec.get("retry") if isinstance(record.spec, dict) else None
    return found if isinstance(found, dict) else {}


def kept(record: JobRecord, impl: Backend) -> bool:
    """Whether a controller on this host decides how the job's attempts end: it has a
    retry policy of more than one attempt, and nobody asked to cancel it (a cancel ends
    it at once). `impl` is the job's backend."""
    most = policy(record).get("max_attempts", 1)
    return isinstance(most, int) and most > 1 and not record.cancel_requested_at


def at_send(record: JobRecord, impl: Backend) -> bool:
    """Whether the job's controller starts when the job is sent: unless its backend's
    jobs continue themselves past a time limit (then the command that sees an attempt
    end otherwise starts it), so nothing of ours waits on the submitting host."""
    return kept(record, impl) and not impl.capabilities.continues_in_job


def ended_detail(number: int, state: str, exit_code: int | None) -> str:
    code = f" (exit code {exit_code})" if exit_code is not None else ""
    return f"attempt {number} ended {state}{code}; its controller decides what follows"


def ensure(record: JobRecord, store: Store) -> int | None:
    """Start the job's controller unless a live one holds it; the new process's pid."""
    if alive(record.meta.get("keeper")) or record.state.terminal:
        return None
    log = store.jobs_dir(record.id) / "controller.log"
    private.folder(log.parent)
    with open(log, "ab", opener=private.opener) as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", CONTROLLER, record.id],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,  # outlives the command that started it
            close_fds=True,
            env={**os.environ, "ANYLAUNCH_HOME": str(store.root)},
        )
    # Held for the child from now on, so commands in the next moment (before the child
    # has claimed it itself) see a live controller and start no other.
    import psutil

    try:
        started = psutil.Process(proc.pid).create_time()
    except psutil.NoSuchProcess:
        return None  # it already ended: the next command looks again
    store.claim_keeper(record.id, {"pid": proc.pid, "started": started})
    return proc.pid


def number(record: JobRecord) -> int:
    return current_number(record.meta)
