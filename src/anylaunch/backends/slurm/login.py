"""The login node of a remote Slurm cluster, reached over one multiplexed ssh connection.

`slurm.login: [user@]host[:port]` (or an alias of the user's ssh configuration;
`ANYLAUNCH_SLURM_LOGIN` for every job) makes every Slurm command of a job run on that
host: sbatch, squeue, sacct, scancel, and the reads of its logs. They all go through one
OpenSSH connection per login (ControlMaster): the first command opens it and the others
ride on it, so a poll of 1,000 jobs costs one round trip, as one squeue does locally. The
connection stays open `PERSIST_S` seconds after the last command (ControlPersist), so the
next `ps` is one round trip too rather than a new login: the one process of ours that
outlives a command without being asked for, and it ends by itself. Its socket lives in a
folder only this user can enter: whoever reaches the socket runs commands on the cluster
as the user.

ssh runs with BatchMode=yes, so it never waits at a prompt: a host key that is missing or
changed, a key that needs a passphrase, a password login, each is one line saying what to
do. The user's own ssh configuration and known_hosts apply as they are; host-key checking
is never turned off.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shlex
import socket
import stat
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from anylaunch.errors import BackendError

ENV = "ANYLAUNCH_SLURM_LOGIN"
PERSIST_S = 300
CONNECT_TIMEOUT_S = 20
# Commands run on the login node by each destination in this process: what a benchmark
# or a test counts to show that a poll of many jobs is one round trip.
ROUND_TRIPS: Counter[str] = Counter()
# ssh's own exit status when it failed (could not connect, or the connection broke);
# a remote command's status is passed through otherwise.
SSH_FAILED = 255
# A command not found by the login node's shell.
NOT_FOUND = 127

_USER = r"[A-Za-z0-9._][A-Za-z0-9._-]*"
_HOST = r"[A-Za-z0-9_][A-Za-z0-9._-]*|\[[0-9A-Fa-f:.]+\]"
_DESTINATION = re.compile(rf"(?:(?P<user>{_USER})@)?(?P<host>{_HOST})(?::(?P<port>\d{{1,5}}))?")
# Reads NAME=VALUE entries, each ending in a NUL byte, from stdin into the environment of
# the command that follows: how secrets reach sbatch on the login node without being
# written to a file or shown in a command line (`export` is a shell builtin).
_EXPORTER = 'while IFS= read -r -d "" kv; do export "$kv"; done; exec "$@"'


class LoginError(BackendError):
    """ssh could not reach or log in to the login node; the message says what to do."""

    code = "SSH"


@dataclass(frozen=True)
class Login:
    """A login node as the job file names it: `[user@]host[:port]` or an ssh alias."""

    text: str  # as written, for messages and the plan
    destination: str  # what ssh is given: `user@host` or `host`
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> Login:
        """The login node named by `text`; ValueError saying what is wrong."""
        match = _DESTINATION.fullmatch(text.strip())
        port = int(match["port"]) if match and match["port"] else None
        if match is None or (port is not None and not 1 <= port <= 65535):
            raise ValueError(
                f"'{text}' is not [user@]host[:port] or an ssh config alias"
                " (letters, digits, '.', '_', '-'; a port from 1 to 65535)"
            )
        host = match["host"].strip("[]")
        destination = f"{match['user']}@{host}" if match["user"] else host
        return cls(text.strip(), destination, port)

    @property
    def socket(self) -> Path:
        """The connection's socket: named by the destination, in the private folder."""
        digest = hashlib.sha256(f"{self.destination}:{self.port or ''}".encode()).hexdigest()
        return control_dir() / digest[:20]

    def options(self) -> list[str]:
        """ssh's options for every call: no prompt, the shared connection, keep-alives (a
        dead network ends a command in about a minute instead of never)."""
        opts = [
            "-o", "BatchMode=yes",
            "-o", f"ControlPath={self.socket}",
            "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
            "-o", "ServerAliveInterval=15",
            "-o", "ServerAliveCountMax=4",
        ]  # fmt: skip
        return opts + (["-p", str(self.port)] if self.port else [])

    def rsh(self) -> str:
        """The ssh command as rsync's `-e` takes it (split on spaces: none in the parts)."""
        return shlex.join(["ssh", *self.options(), "-o", "ControlMaster=no"])

    # -- commands -------------------------------------------------------------------------

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float,
        data: bytes | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run `argv` on the login node over the shared connection (opened when needed).

        `env`: variables the command gets through ssh's stdin (see `_EXPORTER`), never its
        command line. `data`: the command's stdin (not with `env`). Raises
        subprocess.TimeoutExpired when no answer came in `timeout` seconds: what the
        command did is then not known. ssh's own failure is exit status 255.
        """
        self.connect()
        command = list(argv)
        stdin = data
        if env is not None:
            command = ["bash", "-c", _EXPORTER, "anylaunch-env", *command]
            stdin = b"".join(f"{name}={value}".encode() + b"\0" for name, value in env.items())
        ROUND_TRIPS[self.text] += 1
        return subprocess.run(
            self.ssh(command),
            input=stdin,
            stdin=subprocess.DEVNULL if stdin is None else None,
            capture_output=True,
            timeout=timeout,
            check=False,
        )

    def ssh(self, argv: Sequence[str], *, tty: bool = False) -> list[str]:
        """The ssh command that runs `argv` on the login node over the shared connection
        (open it first: `connect`). `tty`: with a terminal there (this side has one)."""
        return [
            "ssh", *self.options(), "-o", "ControlMaster=no", "-t" if tty else "-T",
            self.destination, shlex.join(argv),
        ]  # fmt: skip

    def output(self, argv: Sequence[str], *, timeout: float = 60) -> str:
        """What `argv` printed on the login node; a one-line LoginError if it failed."""
        try:
            proc = self.run(argv, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise LoginError(f"{self.text} did not answer in {timeout:g}s") from None
        if proc.returncode != 0:
            raise LoginError(self.failure(proc.returncode, proc.stderr, argv[0]))
        return proc.stdout.decode(errors="replace")

    def failure(self, returncode: int, stderr: bytes | str, tool: str) -> str:
        """One line for a command that failed on (or on the way to) the login node."""
        text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr
        if returncode == SSH_FAILED:
            return explain(self, text)
        if returncode == NOT_FOUND:
            return (
                f"{tool} not found on the login node {self.text} — install the Slurm client"
                " tools there, or put them on the PATH of a non-interactive ssh session"
                " (~/.bashrc, or the site's profile)"
            )
        lines = " ".join(text.split())
        return f"{tool} failed on {self.text}: {lines or f'exit status {returncode}'}"

    # -- the shared connection ------------------------------------------------------------

    def connect(self) -> None:
        """Open the shared connection unless one answers already: one process at a time
        per login (a lock file), the socket of a dead one removed first."""
        path = self.socket
        if _answers(path):
            return
        with _locked(path.with_suffix(".lock")):
            if _answers(path):
                return
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # a master that was killed leaves its socket behind
            errors = path.with_suffix(".err")
            argv = [
                "ssh", *self.options(),
                "-o", "ControlMaster=yes",
                "-o", f"ControlPersist={PERSIST_S}",
                "-N", "-f", self.destination,
            ]  # fmt: skip
            # stderr goes to a file: the master, once in the background, keeps what it was
            # given, and a pipe would keep a reader waiting for its end until it exits.
            with open(errors, "wb") as sink:
                try:
                    proc = subprocess.run(
                        argv,
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=sink,
                        timeout=CONNECT_TIMEOUT_S + 40,
                        check=False,
                    )
                except FileNotFoundError:
                    raise LoginError(
                        "ssh not found — install the OpenSSH client (openssh-client)"
                    ) from None
                except subprocess.TimeoutExpired:
                    raise LoginError(
                        f"ssh to {self.text} did not log in within"
                        f" {CONNECT_TIMEOUT_S + 40}s — check that `ssh {self.text} true`"
                        " works without a prompt"
                    ) from None
            if proc.returncode != 0:
                raise LoginError(explain(self, errors.read_text(errors="replace")))
            deadline = time.monotonic() + 5
            while not _answers(path) and time.monotonic() < deadline:
                time.sleep(0.02)

    def close(self) -> None:
        """End the shared connection now (tests; a user may run `ssh -O exit` too)."""
        if not _answers(self.socket):
            return
        subprocess.run(
            ["ssh", *self.options(), "-O", "exit", self.destination],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
            check=False,
        )


def control_dir() -> Path:
    """The private folder of the connections' sockets (mode 0700, this user's), short
    enough for a socket's path (about 100 bytes at most)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime and len(runtime) < 60 and os.path.isdir(runtime):
        path = Path(runtime) / "anylaunch-ssh"
    else:
        base = "/tmp" if os.path.isdir("/tmp") else tempfile.gettempdir()
        path = Path(base) / f"anylaunch-ssh-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise LoginError(
            f"{path} is not a private folder of this user (it must be a folder of yours,"
            " mode 0700): it would hold the sockets of your ssh connections — remove it,"
            " and anylaunch makes it again"
        )
    return path


def _answers(path: Path) -> bool:
    """A master listens on the socket (a dead one's file refuses the connection)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(2)
        probe.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        probe.close()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def explain(login: Login, stderr: str) -> str:
    """ssh's complaint as one line that says what to do about it."""
    text = " ".join(stderr.split())
    where = login.text
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in text:
        return (
            f"the host key of {where} is not the one recorded in known_hosts — ask the"
            " cluster's admins whether it changed; if it did, remove the old one with"
            f" `ssh-keygen -R HOST` and run `ssh {where}` once to check and accept the new one"
        )
    if "Host key verification failed" in text or "host key is known" in text:
        return (
            f"the host key of {where} is not in your known_hosts — run `ssh {where}` once,"
            " compare the fingerprint with the one your cluster publishes and answer yes"
            " (anylaunch never skips host-key checking)"
        )
    if "Permission denied" in text or "Too many authentication failures" in text:
        return (
            f"ssh could not log in to {where} without a prompt — load your key into the"
            " agent (`ssh-add`), or name it with IdentityFile in ~/.ssh/config; anylaunch"
            " runs ssh with BatchMode=yes and cannot answer a password or passphrase prompt"
        )
    if "Could not resolve hostname" in text:
        return (
            f"{where} is neither a host name nor an alias of your ~/.ssh/config — fix"
            f" slurm.login (or {ENV})"
        )
    if any(
        word in text
        for word in (
            "Connection refused",
            "timed out",
            "No route to host",
            "Network is unreachable",
        )
    ):
        return f"cannot reach {where}: {text or 'no answer'} — check the host, port and network"
    return f"ssh to {where} failed: {text or 'the connection was lost'}"
