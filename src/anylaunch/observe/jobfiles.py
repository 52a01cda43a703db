"""Files a job left in its folder (logs, profiling reports), opened without following links.

A job can write into its own folder, so whatever is there is the job's word, not ours: a
symbolic link `nsys/x.nsys-rep -> /etc/shadow` would make every reader (the dashboard, `logs`,
`status`) read a file the job itself could not. Each step below the folder is opened
with O_NOFOLLOW, relative to the step before (no window between a check and the open),
and only a plain file with one name is read.
"""

from __future__ import annotations

import os
import stat
from pathlib import PurePath


class Refused(PermissionError):
    """A path that is a link, leaves its folder, or is not a plain file."""


_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO must not block


def open_inside(root: str, path: str) -> int:
    """A file descriptor of `path`, a plain file inside the folder `root`.

    Raises Refused (for a link anywhere below `root`, `..`, a path outside it, a FIFO or a
    device, a second hard link), FileNotFoundError, or another OSError.
    """
    parts = _parts_below(root, path)
    fd = os.open(root, _DIR)
    for part in parts[:-1]:
        fd = _step(fd, part, path, _DIR | os.O_NOFOLLOW)
    fd = _step(fd, parts[-1], path, _FILE)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Refused(f"{path} is not a plain file")
        if info.st_nlink > 1:  # a hard link can name a file from anywhere on the disk
            raise Refused(f"{path} has other names (a hard link)")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_inside(root: str, path: str, start: int = 0, limit: int | None = None) -> bytes:
    """Bytes of a file inside `root` from offset `start` (at most `limit`)."""
    fd = open_inside(root, path)
    with os.fdopen(fd, "rb") as handle:
        if start:
            handle.seek(start)
        return handle.read() if limit is None else handle.read(limit)


def size_inside(root: str, path: str) -> int:
    fd = open_inside(root, path)
    try:
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def _parts_below(root: str, path: str) -> list[str]:
    full = PurePath(os.path.normpath(os.path.join(root, path)))
    base = PurePath(os.path.normpath(root))
    if ".." in PurePath(path).parts or full == base or not full.is_relative_to(base):
        raise Refused(f"{path} is not inside {root}")
    return list(full.relative_to(base).parts)


def _step(fd: int, part: str, path: str, flags: int) -> int:
    """Open `part` relative to the folder `fd`, which is closed either way."""
    try:
        nxt = os.open(part, flags, dir_fd=fd)
    except OSError as exc:
        if _is_link(fd, part):
            raise Refused(f"{path} goes through a symbolic link ({part})") from None
        raise exc from None
    finally:
        os.close(fd)
    return nxt


def _is_link(fd: int, part: str) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(part, dir_fd=fd).st_mode)
    except OSError:
        return False
