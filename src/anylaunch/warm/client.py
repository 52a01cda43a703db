"""The `anylaunch` command's entry point: a dry-run goes to a warm server when one is
running, and everything else (and a dry-run without a server) runs here as always.

A dry-run is all start-up: importing pydantic alone costs eight times a bare Python's
start, and the job file's models nearly as much again, while the plan itself takes a few
milliseconds. A warm server has paid the imports once; it forks a worker per command that
gets this process's arguments, environment, working directory and standard streams, so
the command runs exactly as it would here. The same idea as Mercurial's chg.
"""

from __future__ import annotations

import _socket
import io
import marshal
import os
import signal
import sys

from anylaunch.warm import wire


def main() -> None:
    args = sys.argv[1:]
    warm = False
    if wire.eligible(args):
        try:
            warm = wire.enabled(os.environ)
        except wire.WarmSwitchError as exc:
            _refuse(str(exc), args)
    if not warm:
        _cold()
        return
    folder = wire.directory(os.environ)
    if folder is None:
        _cold()
        return
    identity = wire.identity(os.environ)
    base = os.path.join(folder, wire.key(identity))
    try:
        code, spawn = _ask(base + ".sock", identity)
    except KeyboardInterrupt:  # before the worker could take the signal over
        print("aborted", file=sys.stderr)
        sys.exit(130)
    if code is not None:
        sys.exit(code)
    try:
        _cold()
    finally:
        if spawn:
            _spawn(folder, base)


def _refuse(message: str, args: list[str]) -> None:
    """A usage error, printed as the CLI prints one (JSON with --json), exit 2."""
    import json

    from anylaunch.errors import UsageError

    if "--json" in wire.ours(args):
        print(json.dumps(UsageError(message).to_json(), indent=2))
    else:
        print(f"anylaunch: error: {message}", file=sys.stderr)
    sys.exit(2)


def _cold() -> None:
    from anylaunch.cli import main as cli_main

    cli_main()


def _ask(path: str, identity: str) -> tuple[int | None, bool]:
    """The command's exit status from a warm server, or None and whether to start one."""
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        conn.settimeout(wire.HANDSHAKE_S)
        try:
            conn.connect(path)
        except OSError:
            return None, True
        try:
            started = _hand_over(conn, identity)
            if isinstance(started, bytes):
                return None, started == wire.STALE
            _forward_signals(started)
            conn.sendall(wire.GO)
        except OSError:  # nothing has run: the command runs here
            return None, False
        return _wait(conn), False
    finally:
        conn.close()


def _hand_over(conn: _socket.socket, identity: str) -> int | bytes:
    """Send the command; the worker's pid once it is ready to start, or its refusal
    (empty when there is nothing to hand over, or the server closed)."""
    streams = []
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        if not isinstance(stream, io.TextIOWrapper):  # closed, or not a file
            return b""
        streams.append(
            (stream.encoding, stream.errors, stream.line_buffering, stream.write_through)
        )
    mask = os.umask(0)
    os.umask(mask)
    request = marshal.dumps(
        {
            "identity": identity,
            "argv": sys.argv,
            "cwd": os.getcwd(),
            "env": dict(os.environ),
            "umask": mask,
            "streams": streams,
        }
    )
    fds = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in (0, 1, 2))
    conn.sendmsg(
        [wire.HELLO + wire.number(len(request))],
        [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)],
    )
    conn.sendall(request)
    reply = wire.receive(conn, 1)
    if reply != wire.STARTED:
        return reply
    return wire.unnumber(wire.receive(conn, 4))


def _forward_signals(pid: int) -> None:
    """From now on Ctrl-C and the like reach the worker, which ends as the command would;
    the worker is in the server's session, not the terminal's."""

    def forward(signum: int, _frame: object) -> None:
        try:
            os.kill(pid, signum)
        except OSError:  # it has just ended
            return

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)


def _wait(conn: _socket.socket) -> int:
    """The worker's exit status, once it reports it."""
    conn.settimeout(None)
    reply = wire.receive(conn, 5)
    if reply[:1] == wire.EXITED and len(reply) == 5:
        return wire.unnumber(reply[1:])
    print("anylaunch: the warm server's worker ended without an exit status", file=sys.stderr)
    return 1


def _spawn(folder: str, base: str) -> None:
    """Start a server for the next command in the background, with this interpreter and
    import path, and none of this environment's secrets."""
    import subprocess
    import time

    try:
        if time.time() - os.stat(base + wire.FAILED).st_mtime < wire.RETRY_FAILED_S:
            return  # the last server could not start: its log says why
    except OSError:
        pass
    env = {name: os.environ[name] for name in wire.SERVER_ENV if name in os.environ}
    code = (
        f"import sys; sys.path[:] = {sys.path!r}; from anylaunch.warm.server import serve; serve()"
    )
    try:
        with open(base + ".log", "ab") as log:
            subprocess.Popen(
                [sys.executable, "-c", code, folder],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                cwd="/",
                env=env,
                start_new_session=True,
            )
    except OSError:
        pass
