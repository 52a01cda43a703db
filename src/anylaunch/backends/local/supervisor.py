"""The process that owns one local job: starts every node, watches, records the end.

Run as `python -m anylaunch.backends.local.supervisor JOB_DIR` in its own session.
It makes itself a child subreaper, because torchrun starts each worker in a new session
(`start_new_session=True`): signalling a process group would miss them, while as
subreaper every descendant, orphaned or not, stays in our process tree until we end it.

Every node process gets SIGTERM the moment its supervisor dies (a parent-death signal),
so a `kill -9` of the supervisor cannot leave training running unsupervised: torchrun's
agent passes the signal on to its workers. What a node started outside the agent's
reach is ended by the next `anylaunch` command that polls or cancels the job (every
process of a job carries ANYLAUNCH_JOB_ID in its environment).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anylaunch.state import State

if TYPE_CHECKING:
    from anylaunch.store import Store

# The program's first line is what the person running `anylaunch run` waits for, so the
# nodes start before this process imports the store (sqlite3, dataclasses) and psutil:
# only the ending of a job needs those.

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def main(job_dir: Path) -> int:
    plan = json.loads((job_dir / "plan.json").read_text())
    payload = plan["payload"]
    grace = float(payload.get("kill_grace_s", 10.0))
    job_id = plan["job_id"]
    _become_subreaper()

    stop: dict[str, int | None] = {"signal": None}

    def on_signal(signum: int, _frame: Any) -> None:
        stop["signal"] = signum

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)

    store: Store | None = None
    first_log = payload["nodes"][0]["log"]
    if payload.get("stage_in"):
        store = _store()
        store.transition(job_id, State.STARTING)
        code = _step(payload["stage_in"], payload["workdir"], first_log, stop)
        if stop["signal"] is not None:
            _terminate_tree(grace)
            return _finish(job_dir, store, job_id, State.CANCELLED, None, "cancelled")
        if code != 0:
            return _finish(
                job_dir, store, job_id, State.FAILED, code, "stage-in failed (see node 0's log)"
            )
    procs: list[subprocess.Popen[bytes]] = []
    for node in payload["nodes"]:
        Path(node["log"]).parent.mkdir(parents=True, exist_ok=True)
        with open(node["log"], "ab") as log:
            try:
                procs.append(
                    subprocess.Popen(
                        node["argv"],
                        env={**os.environ, **node["env"]},
                        cwd=payload["workdir"],
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        preexec_fn=_die_with(os.getpid()),
                    )
                )
            except OSError as exc:
                log.write(f"anylaunch: cannot start node {node['node_rank']}: {exc}\n".encode())
                _terminate_tree(grace)
                return _finish(
                    job_dir,
                    store or _store(),
                    job_id,
                    State.FAILED,
                    127,
                    f"node {node['node_rank']}: {exc}",
                )
    if store is None:
        store = _store()
        store.transition(job_id, State.STARTING)
    store.transition(job_id, State.RUNNING)

    first_failure: tuple[int, int] | None = None  # (node rank, exit code)
    failed_at = 0.0
    release = payload.get("rdzv_release")
    while True:
        codes = [p.poll() for p in procs]
        if release and all(code is not None for code in codes[1:]):
            # Node 0's agent holds the rendezvous store open until no other node needs it.
            Path(release).touch()
            release = None
        if stop["signal"] is not None:
            _terminate_tree(grace)
            return _finish(job_dir, store, job_id, State.CANCELLED, None, "cancelled")
        if first_failure is None:
            for rank, ended in enumerate(codes):
                if ended is not None and ended != 0:
                    first_failure, failed_at = (rank, ended), time.monotonic()
                    break
        if all(code is not None for code in codes):
            break
        if first_failure is not None and time.monotonic() - failed_at > grace:
            # Peers of a failed node would block in collectives until their timeout.
            _terminate_tree(grace)
            break
        time.sleep(0.1)

    _terminate_tree(grace)  # whatever a node left behind must not outlive the job
    # Outputs go up after failures too: partial results and logs help diagnose them.
    staged_out = 0
    if payload.get("stage_out") and stop["signal"] is None:
        staged_out = _step(payload["stage_out"], payload["workdir"], first_log, stop)
    if first_failure is None and staged_out == 0:
        return _finish(job_dir, store, job_id, State.SUCCEEDED, 0, None)
    if first_failure is None:
        return _finish(
            job_dir, store, job_id, State.FAILED, staged_out, "stage-out failed (see node 0's log)"
        )
    node_rank, exit_code = first_failure
    return _finish(
        job_dir, store, job_id, State.FAILED, exit_code, f"node {node_rank} exited with {exit_code}"
    )


def _step(argv: list[str], cwd: str, log_path: str, stop: dict[str, Any]) -> int:
    """Run a staging step to completion (or until cancelled), its output in `log_path`."""
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with(os.getpid()),
        )
    while proc.poll() is None:
        if stop["signal"] is not None:
            proc.terminate()
            return proc.wait()
        time.sleep(0.1)
    return proc.returncode


def _become_subreaper() -> None:
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _die_with(parent: int) -> Callable[[], None] | None:
    """For the child, between fork and exec: SIGTERM when `parent` dies (kept across exec).

    If the parent died before the request took effect, the child must not start at all.
    """
    if not sys.platform.startswith("linux"):
        return None

    libc = ctypes.CDLL(None, use_errno=True)  # loaded here: the child only makes the call

    def arm() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(128 + signal.SIGTERM)

    return arm


def _store() -> Store:
    from anylaunch.store import Store

    return Store()


def _terminate_tree(grace: float) -> None:
    """SIGTERM every descendant, SIGKILL what is left after `grace` seconds."""
    import psutil

    from anylaunch.backends.local.proctree import end_descendants

    end_descendants(psutil.Process(), grace)


def _finish(
    job_dir: Path,
    store: Store,
    job_id: str,
    state: State,
    exit_code: int | None,
    detail: str | None,
) -> int:
    """The result file first (a poll can read it even if the store write fails), then the store."""
    result = {
        "state": state.value,
        "exit_code": exit_code,
        "detail": detail,
        "ended_at": time.time(),
    }
    tmp = job_dir / "result.json.tmp"
    tmp.write_text(json.dumps(result))
    os.replace(tmp, job_dir / "result.json")
    store.transition(job_id, state, exit_code=exit_code, detail=detail)
    return 0 if state is State.SUCCEEDED else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
