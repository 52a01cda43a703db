"""A warm server: one process per user and interpreter that has imported what a dry-run
needs, and forks a worker for each command a client hands it.

The worker takes the client's arguments, whole environment, working directory, umask and
standard streams, then runs the ordinary CLI, so a dry-run prints here exactly what it
would print in its own process. The server itself keeps no command's environment: it is
started with the interpreter's settings and paths only, and each worker's memory ends
with it.

The server ends when it has been idle for ANYLAUNCH_WARM_IDLE_S (ten minutes), when its
socket is removed or taken over, on SIGTERM, and as soon as a worker finds that the code
on disk is no longer the code it has loaded.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import gc
import io
import marshal
import os
import select
import signal
import socket
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import anylaunch
from anylaunch.warm import wire

TICK_S = 5.0
LOG_BYTES = 1 << 20  # a line per dry-run; the log starts again past this
# What the server runs once before it listens, so that every module and validator a
# dry-run of each kind touches is loaded: a job for each backend that renders without
# the library of a cloud (SkyPilot's is imported by the worker that needs it), and a
# workflow.
_SECTIONS = {
    "local": "launcher: torchrun",
    "slurm": "image: nvcr.io/nvidia/pytorch:25.08-py3\nslurm: {partition: gpu}",
    "lepton": "image: nvcr.io/nvidia/pytorch:25.08-py3\nlepton: {resource_shape: gpu.8xh100-sxm}",
}
WARM_UP = {
    **{
        f"{backend}.yaml": f"name: warm\ncommand: python train.py\nnodes: 2\n{section}\n"
        for backend, section in _SECTIONS.items()
    },
    "flow.yaml": "steps:\n  a: {command: 'true'}\n  b: {command: 'true', needs: [a]}\n",
}


@dataclass(frozen=True)
class Loaded:
    """What every worker compares a request with."""

    identity: str
    fingerprint: int
    package: str
    log: IO[str]
    lock: int  # a worker closes it, so that a long dry-run never holds a successor back


def serve() -> None:
    """Run a server for the folder named on the command line, until it has no reason to."""
    folder = sys.argv[1]
    identity = wire.identity(os.environ)
    base = os.path.join(folder, wire.key(identity))
    lock = open(base + ".lock", "a+")  # noqa: SIM115 - held for the server's whole life
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return  # another server for these clients is running or starting
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    if os.fstat(2).st_size > LOG_BYTES:
        os.ftruncate(2, 0)
    log = os.fdopen(os.dup(2), "a", buffering=1)
    signal.signal(signal.SIGTERM, _stop)  # from now on, leave through the finally clauses
    try:
        started = time.monotonic()
        _warm_up(log)
        package = os.path.dirname(anylaunch.__file__)
        loaded = Loaded(identity, wire.fingerprint(package, sys.path), package, log, lock.fileno())
        log.write(f"{_now()} warm after {time.monotonic() - started:.2f} s, pid {os.getpid()}\n")
        gc.collect()  # the warm-up's leftovers (its store's connections among them) go now,
        gc.freeze()  # and what is loaded stays shared with every worker instead of copied
        with contextlib.suppress(FileNotFoundError):
            os.unlink(base + wire.FAILED)
        _listen(base + ".sock", loaded)
    except _Stopped:
        log.write(f"{_now()} exit: stopped before it listened\n")
    except Exception:
        # Clients then run their commands themselves, and wait before starting another.
        traceback.print_exc(file=log)
        Path(base + wire.FAILED).touch()


def _warm_up(log: IO[str]) -> None:
    """Dry-run each of WARM_UP once; one that fails is a line in the log, and its part of
    the code is imported by the first worker that needs it instead."""
    from anylaunch.cli import main

    saved_argv, saved_env = list(sys.argv), dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="anylaunch-warm-") as scratch:
        os.environ["ANYLAUNCH_HOME"] = os.path.join(scratch, "home")
        for name, text in WARM_UP.items():
            path = Path(scratch, name)
            path.write_text(text)
            for extra in ([], ["--json"]):
                sys.argv = ["anylaunch", "run", str(path), "--dry-run", *extra]
                try:
                    with (
                        open(os.devnull, "w") as sink,
                        contextlib.redirect_stdout(sink),
                        contextlib.redirect_stderr(sink),
                        contextlib.suppress(SystemExit),
                    ):
                        main()
                except Exception as exc:
                    log.write(f"{_now()} warm-up of {name} failed: {exc!r}\n")
    sys.argv = saved_argv
    os.environ.clear()
    os.environ.update(saved_env)


def _listen(path: str, loaded: Loaded) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    staging = f"{path}.{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(staging)
    listener.bind(staging)
    listener.listen(64)
    os.replace(staging, path)
    mine = os.stat(path).st_ino
    idle_s = float(os.environ.get(wire.IDLE, wire.IDLE_S))
    last = time.monotonic()
    why = "idle"
    try:
        while True:
            _reap()
            ready, _, _ = select.select([listener], [], [], min(TICK_S, idle_s))
            if ready:
                conn, _ = listener.accept()
                if _same_user(conn):
                    _fork(conn, listener, loaded)
                conn.close()
                last = time.monotonic()
            elif time.monotonic() - last >= idle_s:
                break
            if not _still_mine(path, mine):
                why = "socket removed"
                break
    except _Stopped:
        why = "stopped"
    finally:
        if _still_mine(path, mine):
            os.unlink(path)
        loaded.log.write(f"{_now()} exit: {why}\n")


class _Stopped(BaseException):
    """SIGTERM: leave at once, through the finally clauses (a select would be resumed
    after a handler that returned). Not an Exception: a failed warm-up job is caught as
    one, a stop must not be."""


def _stop(_signum: int, _frame: object) -> None:
    raise _Stopped


def _same_user(conn: socket.socket) -> bool:
    """The folder is private already; the peer's credentials say so once more."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    return int.from_bytes(creds[4:8], sys.byteorder) == os.getuid()


def _still_mine(path: str, inode: int) -> bool:
    try:
        return os.stat(path).st_ino == inode
    except OSError:
        return False


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _fork(conn: socket.socket, listener: socket.socket, loaded: Loaded) -> None:
    if os.fork() != 0:
        return
    code = 0
    try:
        listener.close()
        os.close(loaded.lock)
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _work(conn, loaded)
    except BaseException:  # a worker never returns into the server's loop
        code = 1
    os._exit(code)


def _work(conn: socket.socket, loaded: Loaded) -> None:
    conn.settimeout(wire.HANDSHAKE_S)
    head, fds, _flags, _addr = socket.recv_fds(conn, len(wire.HELLO) + 4, 3)
    try:
        if head[: len(wire.HELLO)] != wire.HELLO or len(fds) != 3:
            return
        request = marshal.loads(wire.receive(conn, wire.unnumber(head[len(wire.HELLO) :])))
        refusal = _refusal(request, loaded)
        if refusal:
            conn.sendall(refusal)
            if refusal == wire.STALE:
                loaded.log.write(f"{_now()} code changed on disk: stopping\n")
                os.kill(os.getppid(), signal.SIGTERM)
            return
        conn.sendall(wire.STARTED + wire.number(os.getpid()))
        if wire.receive(conn, 1) != wire.GO:
            return
        conn.settimeout(None)
        os.umask(request["umask"])
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
    finally:
        for fd in fds:
            os.close(fd)
    _adopt_streams(request["streams"])
    started = time.monotonic()
    code = _run()
    loaded.log.write(
        f"{_now()} served a dry-run in {1000 * (time.monotonic() - started):.1f} ms, exit {code}\n"
    )
    conn.sendall(wire.EXITED + wire.number(code))


def _refusal(request: dict[str, Any], loaded: Loaded) -> bytes:
    """Why this worker may not run the request, or b"" when it may. It takes the
    request's environment and working directory as it checks."""
    if request["identity"] != loaded.identity:
        return wire.NOT_MINE
    if wire.fingerprint(loaded.package, sys.path) != loaded.fingerprint:
        return wire.STALE
    os.environ.clear()
    os.environ.update(request["env"])
    try:
        os.chdir(request["cwd"])
    except OSError:
        return wire.NOT_MINE  # the client's own run says what is wrong with it
    sys.argv = request["argv"]
    return b"" if _is_dry_run(sys.argv[1:]) else wire.NOT_MINE


def _is_dry_run(args: list[str]) -> bool:
    """The CLI's own parser agrees that this is `run --dry-run` (and so starts nothing)."""
    from anylaunch.cli import cli

    if not args or args[0] != "run":
        return False
    try:
        parsed = cli.commands["run"].make_context("run", args[1:], resilient_parsing=True)
    except Exception:  # whatever the parser refuses, the client's own run reports
        return False
    return parsed.params.get("dry_run") is True


def _adopt_streams(settings: list[tuple[str, str, bool, bool]]) -> None:
    """Standard streams on the client's descriptors, with the client's encodings.
    (sys.__stdout__ and its kin keep the server's objects, on the same descriptors.)"""
    made = []
    for fd, (encoding, errors, line_buffering, write_through) in enumerate(settings):
        raw = io.FileIO(fd, "r" if fd == 0 else "w", closefd=False)
        buffered = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
        made.append(
            io.TextIOWrapper(
                buffered,
                encoding=encoding,
                errors=errors,
                newline="\n",
                line_buffering=line_buffering,
                write_through=write_through,
            )
        )
    sys.stdin, sys.stdout, sys.stderr = made


def _run() -> int:
    """The CLI, as the interpreter would run it: its exit status, and what Python itself
    prints for an uncaught exception."""
    from anylaunch.cli import main

    atexit._clear()  # the server's exit functions are not this command's
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = _status(exc.code)
    except KeyboardInterrupt:
        code = 130
    except BaseException:  # printed as the interpreter would
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:
            code = code or 120  # what Python exits with when it cannot flush stdout
    return code


def _status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")
