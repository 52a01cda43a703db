"""Folders and files only their owner can read: a job's folder, its logs and plan, the
kept job text and the store hold what a program printed (its tokens too, if it printed
them), so another user of the machine must not read them."""

from __future__ import annotations

import json
import os
from pathlib import Path

FOLDER = 0o700
FILE = 0o600


def folder(path: str | os.PathLike[str]) -> Path:
    """`path` as a folder only its owner can enter (made if missing; tightened if ours)."""
    path = Path(path)
    path.mkdir(mode=FOLDER, parents=True, exist_ok=True)
    _tighten(path, FOLDER)
    return path


def write(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write a file only its owner can read; text is written as UTF-8."""
    raw = data.encode() if isinstance(data, str) else data
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, FILE)
    try:
        os.fchmod(fd, FILE)  # an existing file keeps its mode through O_CREAT
        view = memoryview(raw)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _tighten(path: Path, mode: int) -> None:
    """Take group and others' access away from a folder of ours that has it."""
    st = path.stat()
    if st.st_uid == os.getuid() and st.st_mode & 0o777 & ~mode:
        path.chmod(st.st_mode & 0o777 & mode)


def opener(path: str, flags: int) -> int:
    """For `open(path, "ab", opener=private.opener)`: a log created only its owner reads."""
    return os.open(path, flags, FILE)


# Secret values a job's text wrote literally (`MY_TOKEN: abc...`) rather than naming a
# variable of the environment. The store and plans keep secrets by name only, so a later
# reader (logs, diagnose, status, the MCP server, the dashboard), which resolves names in
# its own environment, could not know them: they are kept here, beside the job's folder
# under ANYLAUNCH_HOME and readable by its owner alone, so every reader masks them.
KEPT_SECRETS = "secrets.json"


def keep_secrets(root: Path, job_id: str, values: dict[str, str]) -> None:
    """Keep these secret values of the job (none: nothing is written)."""
    if values:
        write(folder(root / "jobs" / job_id) / KEPT_SECRETS, json.dumps(values))


def kept_secrets(root: Path, job_id: str) -> dict[str, str]:
    """The secret values `keep_secrets` kept for the job (none, if it kept none)."""
    try:
        with open(root / "jobs" / job_id / KEPT_SECRETS, encoding="utf-8") as handle:
            found = json.load(handle)
    except (OSError, ValueError):
        return {}
    if not isinstance(found, dict):
        return {}
    return {str(k): v for k, v in found.items() if isinstance(v, str)}
