"""Each emulated job's own network: a Linux network namespace its replicas share.

On Lepton the workers of a job reach each other by name, and what they listen on belongs
to that job: torchrun's store on MASTER_PORT 29400 is that job's alone. Here each job gets
a fresh network namespace holding only `lo`, brought up, so the workers' addresses
(127.<b>.<c>.<i>, see sandbox.job_addresses) are local to it, and two jobs (of this
emulator, or of another checkout's emulator on the same machine) both listen on 29400.

A job on Lepton also reaches services outside the cluster, such as an S3 endpoint. The
emulator stands those in with servers on this machine's loopback, and relays exactly the
endpoints it was told about (`outside`): a listening socket inside the job's namespace,
at the same address and port, whose connections are copied to that address on the host.
Nothing else on the host is reachable from a job: not the emulator's own API, not another
job, not the Slurm daemons.

The namespace is held by an open descriptor of the emulator process, not by a name under
/run/netns, so it goes away with the emulator even when the emulator is killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import ipaddress
import os
import shutil
import socket
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

_CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_IFREQ = "16sH22x"  # struct ifreq: the name, then ifr_flags in a 24-byte union

Endpoint = tuple[str, int]


def parse_endpoint(text: str) -> Endpoint:
    """`127.0.0.1:9000` or `http://127.0.0.1:9000` -> a loopback (address, port)."""
    netloc = urlsplit(text).netloc if "://" in text else text
    host, _, port = netloc.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"{text!r} is not HOST:PORT or a URL with a port")
    address = socket.gethostbyname(host)
    if not ipaddress.ip_address(address).is_loopback:
        raise ValueError(f"{text!r} is not on loopback — jobs reach this machine's loopback only")
    return address, int(port)


def _fail(what: str) -> OSError:
    code = ctypes.get_errno()
    return OSError(code, f"{what}: {os.strerror(code)}")


def _new_namespace_with_lo_up() -> None:
    """Move the calling thread (only it) into a fresh network namespace, `lo` up."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNET) != 0:
        raise _fail("unshare(CLONE_NEWNET)")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        got = fcntl.ioctl(sock, _SIOCGIFFLAGS, struct.pack(_IFREQ, b"lo", 0))
        flags = struct.unpack(_IFREQ, got)[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack(_IFREQ, b"lo", flags | _IFF_UP))


@dataclass
class _Made:
    """What the namespace thread hands back."""

    fd: int = -1
    listeners: list[socket.socket] = field(default_factory=list)
    error: OSError | None = None


class JobNetwork:
    """One job's namespace and the relays into it; `close()` ends both."""

    def __init__(self, outside: Sequence[Endpoint] = ()) -> None:
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        made = _Made()

        def build() -> None:
            # A thread of its own: unshare moves only this thread, and it ends right
            # after, so no other code of the emulator ever runs in the job's namespace.
            # The relays connect to the host from threads started outside it.
            try:
                _new_namespace_with_lo_up()
                made.fd = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
                made.listeners = [_listen(endpoint) for endpoint in outside]
            except OSError as exc:  # raised again in the caller's thread
                made.error = exc

        thread = threading.Thread(target=build, name="lepton-netns")
        thread.start()
        thread.join()
        if made.error is not None:
            if made.fd >= 0:
                os.close(made.fd)
            raise made.error
        self.fd = made.fd
        self._listeners = made.listeners
        for listener, endpoint in zip(made.listeners, outside, strict=True):
            threading.Thread(
                target=self._accept, args=(listener, endpoint), name="lepton-relay", daemon=True
            ).start()

    def enter(self) -> list[str]:
        """The argv prefix that runs a command inside this namespace."""
        return ["nsenter", f"--net=/proc/{os.getpid()}/fd/{self.fd}"]

    def close(self) -> None:
        for listener in self._listeners:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() waiting on it
            listener.close()
        self._listeners = []
        with self._lock:
            conns, self._conns = list(self._conns), set()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _accept(self, listener: socket.socket, target: Endpoint) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # closed: the job ended
            threading.Thread(
                target=self._relay, args=(conn, target), name="lepton-relay", daemon=True
            ).start()

    def _relay(self, conn: socket.socket, target: Endpoint) -> None:
        try:
            upstream = socket.create_connection(target, timeout=10)
        except OSError:
            conn.close()  # the job sees a refused/reset connection, as with a down server
            return
        upstream.settimeout(None)
        with self._lock:
            self._conns.update((conn, upstream))
        back = threading.Thread(target=_pump, args=(upstream, conn), daemon=True)
        back.start()
        _pump(conn, upstream)
        back.join()
        with self._lock:
            self._conns.difference_update((conn, upstream))
        conn.close()
        upstream.close()


def _listen(endpoint: Endpoint) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(endpoint)
    sock.listen(64)
    return sock


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy src to dst until src ends, then pass the end on (half-close)."""
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


@functools.lru_cache(maxsize=1)
def works() -> bool:
    """Whether this process may make network namespaces and `nsenter` into them (root)."""
    if shutil.which("nsenter") is None:
        return False
    try:
        JobNetwork().close()
    except OSError:
        return False
    return True
