"""A job on a cluster reached over ssh: where its folder lives there, how the folder gets
there, and how its logs come back.

The job's folder is made here first (the script, the recipe, the snapshot of the code)
and copied whole to `<job root>/<job id>` on the cluster's shared filesystem (default
`~/.anylaunch/jobs`) before sbatch: with rsync when this machine has it, else as a tar
stream over the same ssh connection (the login node needs only tar). Logs are mirrored
the other way into the job's folder here, from where every reader (`logs -f`, `diagnose`,
the dashboard) reads them as it reads a local job's: each node's file grows by the bytes
the cluster's copy gained since the last read, one round trip for all nodes.
"""

from __future__ import annotations

import contextlib
import posixpath
import shlex
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path

from anylaunch.backends.slurm.login import Login, LoginError

DEFAULT_ROOT = "~/.anylaunch/jobs"
PUSH_TIMEOUT_S = 600
LOG_TIMEOUT_S = 60
# Prints, for each `PATH OFFSET` pair, `@@ START SIZE` and the file's bytes from START to
# SIZE (START is 0 again if the file shrank: it was rewritten); SIZE -1: no file yet.
# The size is read once, so bytes written meanwhile wait for the next read.
_READ_LOGS = (
    'while [ "$#" -gt 1 ]; do f=$1; o=$2; shift 2; n=-1;'
    ' [ -f "$f" ] && n=$(wc -c < "$f");'
    ' n=$((n)); [ "$n" -lt "$o" ] && o=0;'
    ' printf "@@ %s %s\\n" "$o" "$n";'
    ' if [ "$n" -gt "$o" ]; then tail -c "+$((o + 1))" "$f" | head -c "$((n - o))"; fi;'
    " done"
)


def expand(path: str, home: str) -> str:
    """A path on the cluster: `~` and relative paths are under the login's home folder."""
    if path == "~" or path.startswith("~/"):
        path = home + path[1:]
    elif not path.startswith("/"):
        path = f"{home}/{path}"
    return posixpath.normpath(path)


def push(login: Login, local: Path, remote: str) -> None:
    """Copy the folder `local` to `remote` on the cluster (made if missing)."""
    if shutil.which("rsync") is not None:
        done = _rsync(login, local, remote)
        if done is None:
            return
        if "not found" not in done:
            raise LoginError(f"copying the job's folder to {login.text}:{remote} failed: {done}")
    _tar(login, local, remote)  # no rsync on one side: tar is everywhere


def _rsync(login: Login, local: Path, remote: str) -> str | None:
    """None once copied, else rsync's complaint as one line."""
    login.connect()
    argv = [
        "rsync",
        "--archive",
        "--protect-args",  # the remote path reaches rsync as one word, spaces and all
        "--rsh",
        login.rsh(),
        f"--rsync-path=mkdir -p {_quote(remote)} && rsync",
        f"{local}/",
        f"{login.destination}:{remote}/",
    ]
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=PUSH_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise LoginError(
            f"copying the job's folder to {login.text} took over {PUSH_TIMEOUT_S}s"
        ) from None
    if proc.returncode == 0:
        return None
    return " ".join(proc.stderr.split()) or f"rsync exit status {proc.returncode}"


def _tar(login: Login, local: Path, remote: str) -> None:
    """The folder as a tar stream into `tar -x` on the login node."""
    login.connect()
    command = f"mkdir -p {_quote(remote)} && tar -x -f - -C {_quote(remote)} --no-same-owner"
    argv = [
        "ssh", *login.options(), "-o", "ControlMaster=no", login.destination, command,
    ]  # fmt: skip
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=errors
        )
        assert proc.stdin is not None
        try:
            with tarfile.open(fileobj=proc.stdin, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                tar.add(str(local), arcname=".")  # links are stored as links
        except BrokenPipeError:
            pass  # the remote side stopped reading: its complaint says why
        finally:
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.close()
        try:
            proc.wait(timeout=PUSH_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise LoginError(f"copying the job's folder to {login.text} took too long") from None
        errors.seek(0)
        complaint = errors.read()
    if proc.returncode != 0:
        raise LoginError(login.failure(proc.returncode, complaint, "tar"))


def read_logs(login: Login, files: Sequence[tuple[str, Path]]) -> None:
    """Bring each local copy up to date with its file on the cluster: (remote path,
    local path) pairs, one round trip for all."""
    if not files:
        return
    args: list[str] = []
    for remote, local in files:
        args += [remote, str(local.stat().st_size if local.exists() else 0)]
    try:
        proc = login.run(["sh", "-c", _READ_LOGS, "anylaunch-logs", *args], timeout=LOG_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise LoginError(f"{login.text} did not send the job's logs in {LOG_TIMEOUT_S}s") from None
    if proc.returncode != 0:
        raise LoginError(login.failure(proc.returncode, proc.stderr, "reading the logs"))
    _apply(proc.stdout, [local for _, local in files])


def _apply(out: bytes, locals_: Sequence[Path]) -> None:
    """Write what `_READ_LOGS` printed into the local copies, in order."""
    pos = 0
    for local in locals_:
        end = out.find(b"\n", pos)
        if end < 0 or not out.startswith(b"@@ ", pos):
            return  # cut short: the next read asks again from where the copies are
        start_text, size_text = out[pos + 3 : end].split()
        start, size = int(start_text), int(size_text)
        pos = end + 1
        if size < 0:
            continue
        data = out[pos : pos + size - start]
        pos += len(data)
        local.parent.mkdir(parents=True, exist_ok=True)
        mode = "r+b" if local.exists() else "wb"
        with open(local, mode) as handle:
            handle.seek(start)
            handle.write(data)
            handle.truncate()


def _quote(path: str) -> str:
    return shlex.quote(path)
