"""`forward`: a port on a node of a running job, served on 127.0.0.1 here.

Each connection accepted here is joined to the node's port the way the backend says
(`Backend.relay`): straight to a TCP address this machine can open (a local job's nodes
are this machine), or through a program run per connection whose standard input and
output are the connection (`srun ... pipe` on Slurm, `ssh -W` to a SkyPilot node).
Bytes pass through unchanged in both directions; a connection ends when both sides
have closed their half.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
from collections.abc import Callable
from typing import IO

from anylaunch.backends.base import Relay, get_backend
from anylaunch.errors import UsageError
from anylaunch.observe import live

_CHUNK = 65536


class Forward:
    """A listening socket on 127.0.0.1 whose connections go to one port of one node."""

    def __init__(self, job_id: str, node: int, port: int, local_port: int | None) -> None:
        if not 0 < port < 65536:
            raise UsageError(f"port {port} is not a TCP port — give one in 1..65535")
        job = live.running(job_id, node)
        self.job_id, self.node, self.port = job.id, node, port
        self.relay: Relay = get_backend(job.backend).relay(job.record, node, port)
        wanted = port if local_port is None else local_port
        self._closed = threading.Event()
        self._children: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()
        # The node's port is this machine's own: there is nothing to relay.
        self.here = self.relay.address == ("127.0.0.1", wanted)
        self.local_port: int = wanted
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if self.here:
            return
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._server.bind(("127.0.0.1", wanted))
        except OSError as exc:
            self._server.close()
            raise UsageError(
                f"cannot listen on 127.0.0.1:{wanted} ({exc.strerror}) — pick another with"
                " --local-port P (0: any free port)"
            ) from None
        self._server.listen(64)
        self.local_port = self._server.getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.local_port}/"

    def serve(self, stop_after: float | None = None) -> None:
        """Accept connections until `close` (or `stop_after` seconds)."""
        if stop_after is not None:
            timer = threading.Timer(stop_after, self.close)
            timer.daemon = True
            timer.start()
        while not self._closed.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                break  # closed
            threading.Thread(target=self._join, args=(conn,), daemon=True).start()

    def start(self, stop_after: float | None = None) -> None:
        """`serve` in a thread of this process."""
        threading.Thread(target=self.serve, args=(stop_after,), daemon=True).start()

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        with self._lock:
            children = list(self._children)
        for child in children:
            child.terminate()

    def _join(self, conn: socket.socket) -> None:
        with conn:
            if self.relay.address is not None:
                try:
                    upstream = socket.create_connection(self.relay.address, timeout=10)
                except OSError:
                    return  # nothing listens there (yet): the client sees the close
                upstream.settimeout(None)
                with upstream:
                    _both_ways(conn, upstream)
            elif self.relay.argv is not None:
                self._through(conn, self.relay.argv)

    def _through(self, conn: socket.socket, argv: list[str]) -> None:
        env = None if self.relay.env is None else dict(self.relay.env)
        # Its complaints (srun's, ssh's, the node's) go to this process's stderr: a
        # connection that closes at once then says why.
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        with self._lock:
            self._children.add(proc)
        assert proc.stdin is not None and proc.stdout is not None
        try:
            sending = threading.Thread(target=_to_program, args=(conn, proc.stdin), daemon=True)
            sending.start()
            _from_program(proc.stdout, conn)
            sending.join(timeout=5)
        finally:
            with contextlib.suppress(OSError):
                proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            with self._lock:
                self._children.discard(proc)


def _both_ways(a: socket.socket, b: socket.socket) -> None:
    other = threading.Thread(target=_copy, args=(b.recv, a), daemon=True)
    other.start()
    _copy(a.recv, b)
    other.join()


def _copy(read: Callable[[int], bytes], sink: socket.socket) -> None:
    try:
        while data := read(_CHUNK):
            sink.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


def _to_program(conn: socket.socket, stdin: IO[bytes]) -> None:
    try:
        while data := conn.recv(_CHUNK):
            stdin.write(data)
            stdin.flush()
    except OSError:
        pass
    with contextlib.suppress(OSError):
        stdin.close()


def _from_program(stdout: IO[bytes], conn: socket.socket) -> None:
    try:
        while data := stdout.read1(_CHUNK):  # type: ignore[attr-defined]
            conn.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_WR)
