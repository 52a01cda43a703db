"""What a warm client and its server agree on: whether warm start is on, where the socket
lives, which processes may share a server, when a server's code is stale, and the bytes
between them.

The client runs this before anything else of anylaunch is imported, so it uses only the
cheap, built-in parts of the standard library (no `socket`, `enum`, `hashlib`: they would
cost as much as the start-up this saves).
"""

from __future__ import annotations

import _socket
import os
import stat
import sys
import zlib

# Read by type checkers only: importing collections.abc would cost the client ~2 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

SWITCH = "ANYLAUNCH_WARM"
IDLE = "ANYLAUNCH_WARM_IDLE_S"
IDLE_S = 600.0
_ON = frozenset({"1", "true", "yes", "on"})
_OFF = frozenset({"0", "false", "no", "off"})

# The part of the environment that decides what the interpreter is before any command
# code runs (its import path, its text encoding). Only clients that agree on all of it
# share a server; everything else in the environment is the command's own, and each
# command gets its client's whole environment.
INTERPRETER_ENV = (
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSAFEPATH",
    "PYTHONUTF8",
    "PYTHONIOENCODING",
    "PYTHONWARNINGS",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
)
# What a server keeps of its spawner's environment: the interpreter's part, what locates
# files, and its own idle time. Tokens and keys never reach the server's environment.
SERVER_ENV = (*INTERPRETER_ENV, "PATH", "HOME", "TMPDIR", "VIRTUAL_ENV", "XDG_RUNTIME_DIR", IDLE)

# Left by a server that could not start: clients do not start another for a while.
FAILED = ".failed"
RETRY_FAILED_S = 600.0
# A socket's path has room for 107 bytes; the server's own file names take up to 40.
MAX_FOLDER = 107 - 40

# The request starts with HELLO and its length. Replies of a server's worker, one byte
# each (the pid and the exit status follow as 4-byte integers): P started (send G to go),
# S stale code, K not for this server, X the command ended.
HELLO = b"ALW1"
GO = b"G"
STARTED, STALE, NOT_MINE, EXITED = b"P", b"S", b"K", b"X"
# Until the worker has said it started: a server that does not answer this fast is busy
# or stopped, and the command runs in its own process instead.
HANDSHAKE_S = 5.0


class WarmSwitchError(ValueError):
    """ANYLAUNCH_WARM holds something that is neither on nor off."""


def enabled(environ: Mapping[str, str]) -> bool:
    """Warm start is on unless ANYLAUNCH_WARM says off, or CI is set and it says nothing:
    a CI job runs each command once, and a server left behind would outlive the job."""
    value = environ.get(SWITCH)
    if value is None:
        return environ.get("CI", "").strip().lower() in ("", *_OFF)
    word = value.strip().lower()
    if word in _ON:
        return True
    if word in _OFF:
        return False
    raise WarmSwitchError(
        f"{SWITCH}={value!r} is neither on nor off — set {SWITCH}=1 (a warm"
        f" server answers dry-runs) or {SWITCH}=0, or unset it"
    )


def eligible(args: list[str]) -> bool:
    """A command a warm server may run: `run ... --dry-run`, which prints a plan and starts
    nothing. Words after `--` are the job's own command, never ours. The server checks
    again with the real parser before it runs anything."""
    return bool(args) and args[0] == "run" and "--dry-run" in ours(args)


def ours(args: list[str]) -> list[str]:
    """The arguments anylaunch reads: those before `--`, after which the job's own
    command begins."""
    return args[: args.index("--")] if "--" in args else args


def directory(environ: Mapping[str, str]) -> str | None:
    """The folder of this user's servers, made private if new; None when it exists but
    anyone else could reach into it, or its path is too long for a socket (then warm start
    stays off)."""
    base = environ.get("XDG_RUNTIME_DIR") or "/tmp"
    path = os.path.join(base, f"anylaunch-warm-{os.getuid()}")
    if len(path.encode("utf-8", "surrogateescape")) > MAX_FOLDER:
        return None
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        found = os.lstat(path)
    except OSError:
        return None
    private = stat.S_ISDIR(found.st_mode) and found.st_uid == os.getuid()
    return path if private and not found.st_mode & 0o077 else None


def identity(environ: Mapping[str, str]) -> str:
    """Everything two processes must share to share a server, as one text."""
    seen = [environ.get(name) for name in INTERPRETER_ENV]
    return repr((sys.executable, sys.version, sys.path, seen))


def key(identity_text: str) -> str:
    """A short name for an identity: the socket's file name."""
    data = identity_text.encode("utf-8", "surrogateescape")
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}"


def fingerprint(package_dir: str, paths: list[str]) -> int:
    """Changes when the code a server has loaded may differ from what a new process would
    load: any of anylaunch's files, or anything installed or removed on the import path
    (installing a package changes its folder's time)."""
    seen: list[tuple[str, int, int]] = []
    for root, _dirs, files in os.walk(package_dir):
        for name in files:
            if name.endswith(".py"):
                try:
                    found = os.stat(os.path.join(root, name))
                except OSError:
                    continue
                seen.append((os.path.join(root, name), found.st_mtime_ns, found.st_size))
    for entry in paths:
        try:
            found = os.stat(entry or ".")
        except OSError:
            continue
        seen.append((entry, found.st_mtime_ns, 0))
    return zlib.crc32(repr(sorted(seen)).encode("utf-8", "surrogateescape"))


def number(value: int) -> bytes:
    return value.to_bytes(4, "big", signed=True)


def unnumber(data: bytes) -> int:
    return int.from_bytes(data, "big", signed=True)


def receive(conn: _socket.socket, size: int) -> bytes:
    """Exactly `size` bytes, or fewer when the other side closed."""
    chunks = []
    while size:
        chunk = conn.recv(size)
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)
