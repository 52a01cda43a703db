"""The detached process that advances a workflow (`python -m anylaunch.workflow.controller ID`).

It holds the workflow in the store (`claim_controller`: one live controller at most),
then polls and starts ready steps until the workflow ends. It keeps nothing in memory
that the store does not have, so a controller killed at any point is replaced by the
next command that touches the workflow (`ensure`), which carries on where it stopped.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from anylaunch.errors import AnylaunchError, JobNotFound
from anylaunch.store import Store, alive, private, this_process
from anylaunch.workflow import engine, native
from anylaunch.workflow import record as wfrecord

POLL_S = float(os.environ.get("ANYLAUNCH_WORKFLOW_POLL_S", "2"))


# Set while serving a reader that must start nothing (a `--read-only` MCP server): a
# workflow whose controller died is reported as needing one, and left as it is.
_observing = contextvars.ContextVar("observing", default=False)


@contextlib.contextmanager
def observing() -> Iterator[None]:
    """Within this block `ensure` starts nothing: no controller, no resumed submission."""
    token = _observing.set(True)
    try:
        yield
    finally:
        _observing.reset(token)


def log_path(store: Store, workflow_id: str) -> Path:
    return store.root / "workflows" / f"{workflow_id}.log"


def ensure(workflow_id: str, store: Store, state: str | None = None) -> int | None:
    """Start a controller for an unfinished workflow that has none alive (never started,
    or killed: a crash, a reboot); the new process's pid, or None if none was needed.

    `state` is the workflow's state as just derived from its jobs, when the caller has
    it: the stored one may lag (a controller that wrote FAILED as a retry started).
    A workflow handed to a backend whole needs none: a submission cut short is finished.
    Inside `observing()` nothing is started (None)."""
    if _observing.get():
        return None
    record = store.get_workflow(workflow_id)
    if wfrecord.chained(record):
        if record.state not in engine.ENDED:
            native.resume(record.id, store)  # the backend runs it: no controller needed
        return None
    if record.doc.get("mode") == wfrecord.MANUAL or alive(record.controller):
        return None
    if (state or record.state) in engine.ENDED:
        return None
    path = log_path(store, record.id)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab", opener=private.opener) as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "anylaunch.workflow.controller", record.id],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,  # outlives the command that started it
            close_fds=True,
            env={**os.environ, "ANYLAUNCH_HOME": str(store.root)},
        )
    # Held for the child from now on, so commands in the next moment (before the child
    # has claimed it itself) see a live controller and start no other.
    try:
        import psutil

        store.claim_controller(
            record.id, {"pid": proc.pid, "started": psutil.Process(proc.pid).create_time()}
        )
    except psutil.NoSuchProcess:
        pass  # it already ended: the next command looks again
    return proc.pid


def main(workflow_id: str) -> int:
    store = Store()
    me = this_process()
    if not store.claim_controller(workflow_id, me):
        print(f"workflow {workflow_id}: another controller holds it", flush=True)
        return 0
    print(f"workflow {workflow_id}: controller {me['pid']} started", flush=True)
    while True:
        if not store.path.exists():  # the store it works for was removed: nothing to do
            print(f"workflow {workflow_id}: {store.path} is gone; stopping", flush=True)
            return 0
        try:
            wf = engine.advance(workflow_id, store)
        except JobNotFound:
            print(f"workflow {workflow_id}: not in {store.path}; stopping", flush=True)
            return 0
        except AnylaunchError as exc:  # a backend or the store did not answer: next time
            print(f"workflow {workflow_id}: {exc.message}", flush=True)
            time.sleep(POLL_S)
            continue
        if wf.state in engine.ENDED:
            # A retry may have started attempts since that pass: only leave when a fresh
            # look agrees (a retry after this point starts a new controller itself).
            if engine.view(workflow_id, store, poll=False).state in engine.ENDED:
                print(f"workflow {workflow_id}: {wf.state}", flush=True)
                return 0
            continue
        time.sleep(POLL_S)
        if not store.claim_controller(workflow_id, me):  # taken over: leave it
            return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
