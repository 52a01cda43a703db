"""The process that owns one local job: starts every node, watches, records the end.

Runs as `python -m anylaunch.backends.local.supervisor JOB_DIR` in its own session,
usually exec'd by a child of the submitting process that already started the nodes
(`start.py`; their pids arrive in ANYLAUNCH_SUPERVISOR_NODES). It waits on signals,
never on a timer: a node's end or a cancel wakes it at once. It makes itself a child
subreaper, because torchrun starts each worker in a new session
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
import select
import signal
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anylaunch.state import State
from anylaunch.store import private

if TYPE_CHECKING:
    import subprocess

    from anylaunch.store import Store

# The program's first line is what the person running `anylaunch run` waits for, so the
# nodes start before this process imports the store (sqlite3, dataclasses) and psutil:
# only the ending of a job needs those.

ENTRY = "anylaunch.backends.local.supervisor"
NOTIFY_ENTRY = "anylaunch.observe.announce"
# Four tries with waits of 1, 2 and 4 s, each at most the webhook's or command's timeout.
_NOTIFY_TIMEOUT_S = 180.0
# Pids of the nodes the submitting process already started (see `start.py`), in rank order.
STARTED_ENV = "ANYLAUNCH_SUPERVISOR_NODES"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# Waiting is woken by every child's end and every signal; this bound only keeps a wait
# that somehow missed its wake-up from lasting.
_WAKE_BOUND_S = 2.0

# What `_Node.poll` answers for a node that ended but whose status another process took:
# not a real exit status (those lie in -64..255), so it can never read as success.
LOST = -(1 << 16)

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


class _Node:
    """One node's process: started here, or before the exec by the submitting process
    (then only its pid is known, and it is waited for by pid).

    This process is the only one that reaps a node, so its exit status is always there
    to collect. Should it be gone all the same, the status is not guessed: the node is
    `lost` and the job ends UNKNOWN.
    """

    def __init__(self, pid: int, proc: subprocess.Popen[bytes] | None = None) -> None:
        self.pid = pid
        self._proc = proc
        self._code: int | None = None
        self.lost = False

    def poll(self) -> int | None:
        """The node's exit status once it ended (`LOST` when nobody can tell it)."""
        if self._proc is not None:
            return self._proc.poll()
        if self._code is None:
            try:
                done, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.lost = True
                self._code = LOST
                return self._code
            if done:
                self._code = os.waitstatus_to_exitcode(status)
        return self._code


class _Wake:
    """Sleeps until a child ends, a stop signal arrives or a deadline passes: no polling
    interval stands between a program's end and its result."""

    def __init__(self) -> None:
        self.stop: int | None = None
        self._read, write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(write, False)
        signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._on_stop)
        # A Python-level handler, so that SIGCHLD reaches the wake-up pipe too.
        signal.signal(signal.SIGCHLD, lambda _signum, _frame: None)
        # Blocked by a submitting process across its fork: what arrived meanwhile lands now.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)

    def _on_stop(self, signum: int, _frame: Any) -> None:
        self.stop = signum

    def wait(self, timeout: float | None = None) -> None:
        if self.stop is None:
            bound = _WAKE_BOUND_S if timeout is None else min(max(timeout, 0.0), _WAKE_BOUND_S)
            select.select([self._read], [], [], bound)
        try:
            while os.read(self._read, 512):
                pass
        except BlockingIOError:
            pass


def main(job_dir: Path) -> int:
    code = _supervise(job_dir)
    _announce(job_dir)
    return code


def _announce(job_dir: Path) -> None:
    """A job with `notify:` is announced by its supervisor once its end is stored: the
    moment it ends, with no command running. In a process of its own, so that the
    supervisor imports nothing of diagnosis; whatever it cannot deliver (the receiver
    is down, this process is killed) the next command that polls the job delivers."""
    import contextlib
    import subprocess

    plan = json.loads((job_dir / "plan.json").read_text())
    if not plan["payload"].get("notify"):
        return
    # What fails here is left to the next command that polls the job.
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        subprocess.run(
            [sys.executable, "-m", NOTIFY_ENTRY, plan["job_id"]],
            stdin=subprocess.DEVNULL,
            check=False,
            timeout=_NOTIFY_TIMEOUT_S,
        )


def _supervise(job_dir: Path) -> int:
    plan = json.loads((job_dir / "plan.json").read_text())
    payload = plan["payload"]
    grace = float(payload.get("kill_grace_s", 10.0))
    job_id = plan["job_id"]
    attempt = int(payload.get("attempt", 1))
    # The file this attempt's end goes to, and whether a failure is the job's end.
    ending = _Ending(job_dir / payload.get("result", "result.json"), payload)
    become_subreaper()
    wake = _Wake()
    started = [int(pid) for pid in os.environ.pop(STARTED_ENV, "").split(",") if pid]

    store: Store | None = None
    first_log = payload["nodes"][0]["log"]
    if payload.get("stage_in") and not started:
        store = _store()
        store.transition(job_id, State.STARTING)
        code = _step(payload["stage_in"], payload["workdir"], first_log, wake)
        if wake.stop is not None:
            _terminate_tree(grace)
            return _finish(ending, store, job_id, State.CANCELLED, None, "cancelled")
        if code != 0:
            return _finish(
                ending, store, job_id, State.FAILED, code, "stage-in failed (see node 0's log)"
            )
    nodes = [_Node(pid) for pid in started]
    for node in payload["nodes"][len(nodes) :]:
        try:
            proc = start_node(node, payload["workdir"], os.environ, attempt)
        except OSError as exc:
            with open(node["log"], "ab", opener=private.opener) as log:
                log.write(f"anylaunch: cannot start node {node['node_rank']}: {exc}\n".encode())
            _terminate_tree(grace)
            return _finish(
                ending,
                store or _store(),
                job_id,
                State.FAILED,
                127,
                f"node {node['node_rank']}: {exc}",
            )
        nodes.append(_Node(proc.pid, proc))
    if store is None:
        store = _store()
        store.transition(job_id, State.STARTING)
    store.transition(job_id, State.RUNNING)

    first_failure: tuple[int, int] | None = None  # (node rank, exit code)
    failed_at = 0.0
    release = payload.get("rdzv_release")
    watchdog = _Watchdog(plan, payload["watchdog"]) if payload.get("watchdog") else None
    while True:
        codes = [n.poll() for n in nodes]
        if release and all(code is not None for code in codes[1:]):
            # Node 0's agent holds the rendezvous store open until no other node needs it.
            Path(release).touch()
            release = None
        if wake.stop is not None:
            _terminate_tree(grace)
            return _finish(ending, store, job_id, State.CANCELLED, None, "cancelled")
        if first_failure is None:
            for rank, ended in enumerate(codes):
                if ended is not None and ended != 0 and not nodes[rank].lost:
                    first_failure, failed_at = (rank, ended), time.monotonic()
                    break
        if all(code is not None for code in codes):
            break
        if first_failure is not None and time.monotonic() - failed_at > grace:
            # Peers of a failed node would block in collectives until their timeout.
            _terminate_tree(grace)
            break
        if watchdog is not None and first_failure is None and watchdog.hung():
            _terminate_tree(grace)
            return _finish(ending, store, job_id, State.FAILED, watchdog.EXIT, watchdog.detail)
        timeout = None if first_failure is None else failed_at + grace - time.monotonic()
        if watchdog is not None and first_failure is None:
            timeout = watchdog.left()
        wake.wait(timeout)

    _terminate_tree(grace)  # whatever a node left behind must not outlive the job
    lost = [rank for rank, n in enumerate(nodes) if n.lost]
    if lost and first_failure is None:
        return _finish(
            ending,
            store,
            job_id,
            State.UNKNOWN,
            None,
            f"node {lost[0]}'s exit status was taken by another process: how it ended is"
            " not known — see its log",
        )
    # Outputs go up after failures too: partial results and logs help diagnose them.
    staged_out = 0
    if payload.get("stage_out") and wake.stop is None:
        staged_out = _step(payload["stage_out"], payload["workdir"], first_log, wake)
    if first_failure is None and staged_out == 0:
        return _finish(ending, store, job_id, State.SUCCEEDED, 0, None)
    if first_failure is None:
        return _finish(
            ending, store, job_id, State.FAILED, staged_out, "stage-out failed (see node 0's log)"
        )
    node_rank, exit_code = first_failure
    return _finish(
        ending, store, job_id, State.FAILED, exit_code, f"node {node_rank} exited with {exit_code}"
    )


class _Watchdog:
    """The hang watchdog: when no node's log has grown for `idle_s`, the Python stack of
    every rank goes into node 0's log, and the job is to be stopped."""

    def __init__(self, plan: Mapping[str, Any], settings: Mapping[str, Any]) -> None:
        from anylaunch.node.runtime import live

        self.EXIT = live.EXIT_HUNG
        self.idle_s = float(settings["idle_s"])
        self.py_spy = settings.get("py_spy")
        self.job_id = plan["job_id"]
        self.secret_names = list(plan.get("secret_env", []))
        self.logs = [node["log"] for node in plan["payload"]["nodes"]]
        self.started = time.time()
        self.detail = ""

    def quiet_s(self) -> float:
        from anylaunch.node.runtime import live

        return time.time() - live.last_output(self.logs, self.started)

    def left(self) -> float:
        return max(1.0, self.idle_s - self.quiet_s())

    def hung(self) -> bool:
        """True once the job is hung, its stacks written into node 0's log.

        Silence before any rank exists (a slow import, nodes still meeting) is not a hang
        of the program: the watchdog waits for the ranks, then judges their silence.
        """
        quiet = self.quiet_s()
        if quiet < self.idle_s:
            return False
        from anylaunch.jobfile.secrets import name_pattern
        from anylaunch.node.runtime import live

        if not live.ranks(live.job_processes(self.job_id)):
            return False
        found = live.stacks(self.job_id, None, self.py_spy, self.secret_names, name_pattern())
        with open(self.logs[0], "a", encoding="utf-8") as log:
            log.write(live.hang_report(quiet, found))
        self.detail = (
            f"hang: no rank wrote output for {int(quiet)}s; stopped by the watchdog"
            " (the Python stack of every rank is in node 0's log)"
        )
        return True


def start_node(
    node: Mapping[str, Any], workdir: str, environ: Mapping[str, str], attempt: int = 1
) -> subprocess.Popen[bytes]:
    """Start one node's process, its output appended to its log (after a line that says
    where a later attempt begins); it gets SIGTERM when this process dies."""
    import subprocess

    Path(node["log"]).parent.mkdir(parents=True, exist_ok=True)
    with open(node["log"], "ab", opener=private.opener) as log:
        if attempt > 1:
            from anylaunch.observe.diagnose.lines import attempt_mark

            log.write(f"{attempt_mark(attempt)}\n".encode())
        return subprocess.Popen(
            node["argv"],
            env={**environ, **node["env"]},
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with(os.getpid()),
        )


def _step(argv: list[str], cwd: str, log_path: str, wake: _Wake) -> int:
    """Run a staging step to completion (or until cancelled), its output in `log_path`."""
    import subprocess

    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab", opener=private.opener) as log:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with(os.getpid()),
        )
    while proc.poll() is None:
        if wake.stop is not None:
            proc.terminate()
            return proc.wait()
        wake.wait()
    return proc.returncode


def become_subreaper() -> None:
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _die_with(parent: int) -> Callable[[], None] | None:
    """For the child, between fork and exec: SIGTERM when `parent` dies (kept across exec).

    If the parent died before the request took effect, the child must not start at all.
    The stop signals a submitting process blocks across its fork are unblocked: the
    program must hear a cancel.
    """
    if not sys.platform.startswith("linux"):
        return None

    libc = ctypes.CDLL(None, use_errno=True)  # loaded here: the child only makes the call

    def arm() -> None:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(128 + signal.SIGTERM)

    return arm


def _store() -> Store:
    from anylaunch.store import Store

    return Store()


def _terminate_tree(grace: float) -> None:
    """SIGTERM every descendant, SIGKILL what is left after `grace` seconds."""
    if not _has_children():
        return  # the usual end: nothing left, and psutil stays unimported
    import psutil

    from anylaunch.backends.local.proctree import end_descendants

    end_descendants(psutil.Process(), grace)


def _has_children() -> bool:
    """Whether any process is still this one's child (a subreaper inherits every orphaned
    descendant, so none left means no descendant left). Nothing is reaped by asking."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


class _Ending:
    """Where an attempt's end is written, and whether its failure ends the job."""

    def __init__(self, path: Path, payload: Mapping[str, Any]) -> None:
        self.path = path
        self.controller_decides = bool(payload.get("controller_decides"))


def _finish(
    ending: _Ending,
    store: Store,
    job_id: str,
    state: State,
    exit_code: int | None,
    detail: str | None,
) -> int:
    """The result file first (a poll can read it even if the store write fails), then the
    store — unless the job's controller decides what a failure leads to (another attempt,
    or the job's end): it reads the result file."""
    result = {
        "state": state.value,
        "exit_code": exit_code,
        "detail": detail,
        "ended_at": time.time(),
    }
    tmp = ending.path.with_name(ending.path.name + ".tmp")
    private.write(tmp, json.dumps(result))
    os.replace(tmp, ending.path)
    if ending.controller_decides and state in (State.FAILED, State.UNKNOWN):
        return 1
    if state is State.UNKNOWN:
        store.mark_unknown(job_id, detail or "outcome unknown", final=True)
    else:
        store.transition(job_id, state, exit_code=exit_code, detail=detail)
    return 0 if state is State.SUCCEEDED else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
