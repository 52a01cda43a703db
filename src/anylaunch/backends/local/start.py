"""Starting a local job's supervisor, with the nodes started before any new interpreter.

A fresh `python -m anylaunch.backends.local.supervisor` costs an interpreter start and
its imports before the first node starts, time the person running `anylaunch run`
waits through for the program's first line. So the submitting process forks; the child
leaves the submitter's session and output, makes itself the subreaper, starts every
node, and only then replaces itself by the supervisor (exec, same pid): the supervisor
adopts the nodes by pid, and from then on is exactly the process a plain start makes,
with the same command line (how `reconcile` finds it).

The child must exec before it touches the store: SQLite's state copied by fork (an open
WAL connection, its locks) is not safe to use or to close in a second process, and exec
drops all of it. A submitter with more than one thread (Python's or a library's own)
cannot fork safely: another thread may hold a lock the child needs. It starts the
supervisor the plain way, as does any platform without fork.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from anylaunch.backends.local import supervisor
from anylaunch.store import private

LOG_FILE = "supervisor.log"


def start(job_dir: Path, payload: Mapping[str, Any], env: Mapping[str, str]) -> int:
    """Start the supervisor of the job in `job_dir` with environment `env`; its pid.

    The caller reaps it (`reap`). The supervisor runs in a session of its own: Ctrl-C or
    the end of the submitting process does not reach it or its nodes.
    """
    if not hasattr(os, "fork") or _threads() > 1:
        return _spawn(job_dir, payload, env)
    if not os.path.isdir(payload["workdir"]):  # as a plain start would fail, here and now
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), payload["workdir"])
    # Blocked across the fork: a Ctrl-C meant for the submitter, arriving before the
    # child has its own session, waits in the child until the supervisor handles it.
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, supervisor.STOP_SIGNALS)
    try:
        pid = os.fork()
        if pid == 0:
            _child(job_dir, payload, env)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    return pid


def reap(pid: int) -> bool:
    """Collect the supervisor's exit status if it ended (no zombie); True once it has."""
    proc = _popens.get(pid)
    if proc is not None:  # started the plain way: its Popen collects it
        if proc.poll() is None:
            return False
        del _popens[pid]
        return True
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done != 0


def _spawn(job_dir: Path, payload: Mapping[str, Any], env: Mapping[str, str]) -> int:
    with open(job_dir / LOG_FILE, "ab", opener=private.opener) as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", supervisor.ENTRY, str(job_dir)],
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C of the CLI must not reach the job
            cwd=payload["workdir"],
        )
    _popens[proc.pid] = proc  # kept, so that its end is collected by pid and not warned of
    return proc.pid


_popens: dict[int, subprocess.Popen[bytes]] = {}


def _child(job_dir: Path, payload: Mapping[str, Any], env: Mapping[str, str]) -> NoReturn:
    """The forked child: never returns into the submitter's code, and never runs its
    exit handlers or flushes its buffers (exec or `_exit` only)."""
    try:
        os.setsid()
        _redirect(job_dir / LOG_FILE)
        os.chdir(payload["workdir"])
        supervisor.become_subreaper()
        # Each node's Popen is held until the exec. A Popen dropped sooner reaps its
        # process if it already ended (`Popen.__del__`, and `subprocess._cleanup` at the
        # next start), and after the exec nobody would hold that exit status: only the
        # supervisor may reap a node.
        started: list[subprocess.Popen[bytes]] = []
        if not payload.get("stage_in"):  # with staging, the supervisor starts them after it
            for node in payload["nodes"]:
                try:
                    started.append(
                        supervisor.start_node(
                            node, payload["workdir"], env, int(payload.get("attempt", 1))
                        )
                    )
                except OSError:
                    break  # the supervisor tries this node again and records why it fails
        pids = ",".join(str(proc.pid) for proc in started)
        argv = [sys.executable, "-m", supervisor.ENTRY, str(job_dir)]
        os.closerange(3, _max_fd())  # the submitter's files (its store) stay behind
        os.execve(argv[0], argv, {**env, supervisor.STARTED_ENV: pids})
    except BaseException:
        # Nodes already started get SIGTERM as this process ends (their parent-death
        # signal); the job, without a result, is then reported as such by the next poll.
        import traceback

        os.write(2, traceback.format_exc().encode())
    finally:
        os._exit(127)


def _threads() -> int:
    """Threads of this process, those a library started outside `threading` included."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _redirect(log: Path) -> None:
    """The submitter's terminal or pipes are not the supervisor's: a reader waiting for
    the end of the submitter's output must not wait for the job as well."""
    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(null)
    os.close(out)


def _max_fd() -> int:
    try:
        return int(os.sysconf("SC_OPEN_MAX"))
    except (OSError, ValueError):
        return 65536
