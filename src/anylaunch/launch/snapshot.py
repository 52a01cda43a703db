"""A job's code as it was at submit time: the working folder's files copied into the
job's folder, which the job then runs from, so an edit made while it waits in the queue
changes nothing it reads.

Which files: those git would version — tracked, and untracked but not ignored (`git
ls-files -co --exclude-standard`) — or, outside a repository, every file under the folder.
A link is copied as the link it is, never followed: a snapshot holds nothing from outside
its folder, as git holds links. A size limit (`snapshot.max_mb`) keeps a dataset or a
virtualenv that nobody ignored from being copied into every job: over it, the submission
stops before anything is recorded, naming the biggest files.

The copy's content hash (`sha256:` over each path, its kind, executable bit and content,
in path order) is recorded with the job: two jobs with the same hash ran the same code.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from anylaunch.errors import ConfigError

FOLDER = "snapshot"  # inside the job's folder
DEFAULT_MAX_MB = 100
MAX_FILES = 100_000
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Entry:
    path: str  # relative, with '/'
    size: int = 0
    link: str | None = None  # a link's target, copied as written


@dataclass
class Survey:
    """The files a snapshot of `folder` copies, listed before anything is recorded."""

    folder: str
    entries: list[Entry] = field(default_factory=list)
    size: int = 0
    in_git: bool = False


def survey(folder: str, max_mb: int, *, file: str | None = None) -> Survey:
    """List what a snapshot of `folder` would copy; a ConfigError (naming `file`, the job
    file) if the folder is missing or the files are over `max_mb` or `MAX_FILES`."""
    root = Path(folder)
    if not root.is_dir():
        raise ConfigError(
            f"the folder to snapshot, {folder}, does not exist",
            file=file,
            key="snapshot",
            fix="run from the folder that holds the code (or set the backend's workdir),"
            " or write snapshot: false",
        )
    limit = max_mb * 1_000_000
    found = Survey(folder)
    names = _git_files(root)
    found.in_git = names is not None
    candidates = names if names is not None else _walk(root, "")
    for name in candidates:
        for entry in _entries(root, name):
            found.entries.append(entry)
            found.size += entry.size
            if found.size > limit or len(found.entries) > MAX_FILES:
                raise _too_big(found, max_mb, file)
    return found


def take(found: Survey, dest: Path) -> dict[str, Any]:
    """Copy the surveyed files into `dest` (made anew); their count, size and hash.

    A file that vanished since the survey is left out; a path whose folders became a
    link out of the working folder meanwhile is left out rather than followed."""
    if dest.exists() or dest.is_symlink():
        _remove(dest)  # an earlier try that died midway
    dest.mkdir(parents=True)
    root = Path(found.folder).resolve()
    digest = hashlib.sha256()
    files = size = 0
    for entry in sorted(found.entries, key=lambda e: e.path):
        source = root / entry.path
        target = dest / entry.path
        target.parent.mkdir(parents=True, exist_ok=True)
        if entry.link is not None:
            os.symlink(entry.link, target)
            digest.update(f"link {entry.path}\0{entry.link}\0".encode())
            files += 1
            continue
        if not source.parent.resolve().is_relative_to(root):
            continue
        copied = _copy(source, target)
        if copied is None:
            continue
        content, executable, length = copied
        digest.update(f"file {int(executable)} {entry.path}\0{content}\0".encode())
        files += 1
        size += length
    return {"sha256": f"sha256:{digest.hexdigest()}", "files": files, "bytes": size}


def _copy(source: Path, target: Path) -> tuple[str, bool, int] | None:
    """Copy one regular file without following a link; (content hash, executable,
    bytes), or None when it is gone or no longer a plain file."""
    try:
        fd = os.open(source, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as reader:
        info = os.fstat(reader.fileno())
        if not stat.S_ISREG(info.st_mode):
            return None
        content = hashlib.sha256()
        length = 0
        with open(target, "wb") as writer:
            while chunk := reader.read(_CHUNK):
                content.update(chunk)
                writer.write(chunk)
                length += len(chunk)
    os.chmod(target, stat.S_IMODE(info.st_mode))
    os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))
    return content.hexdigest(), bool(info.st_mode & stat.S_IXUSR), length


def _git_files(root: Path) -> list[str] | None:
    """Tracked and untracked-but-not-ignored paths under `root`, or None outside git."""
    try:
        proc = subprocess.run(
            [
                "git",
                "-C",
                str(root),
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ],
            capture_output=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    names = proc.stdout.decode(errors="surrogateescape").split("\0")
    return list(dict.fromkeys(n for n in names if n))  # a conflicted path is listed per stage


def _walk(root: Path, under: str) -> list[str]:
    """Every path under `root/under`, links not followed (a link to a folder is one
    entry); `.git` folders and files are left out."""
    out: list[str] = []
    start = root / under if under else root
    for path, dirs, files in os.walk(start, followlinks=False):
        rel = os.path.relpath(path, root)
        prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
        for name in [d for d in dirs if os.path.islink(os.path.join(path, d))]:
            out.append(prefix + name)
        dirs[:] = sorted(
            d for d in dirs if d != ".git" and not os.path.islink(os.path.join(path, d))
        )
        out += [prefix + name for name in sorted(files) if name != ".git"]
    return out


def _entries(root: Path, name: str) -> list[Entry]:
    """The entries one listed path gives: a file, a link, or the files of a folder git
    lists as one path (a submodule); nothing for a path that climbs out or is gone."""
    parts = PurePosixPath(name).parts
    if not parts or name.startswith("/") or ".." in parts:
        return []
    path = root / name
    try:
        info = os.lstat(path)
    except OSError:
        return []  # deleted, or listed by git but not checked out
    if stat.S_ISLNK(info.st_mode):
        return [Entry(name, link=os.readlink(path))]
    if stat.S_ISREG(info.st_mode):
        return [Entry(name, info.st_size)]
    if stat.S_ISDIR(info.st_mode):
        return [e for sub in _walk(root, name) for e in _entries(root, sub)]
    return []  # a socket, a fifo: nothing to copy


def _too_big(found: Survey, max_mb: int, file: str | None) -> ConfigError:
    biggest = sorted((e for e in found.entries if e.link is None), key=lambda e: -e.size)[:3]
    named = ", ".join(f"{e.path} ({_mb(e.size)})" for e in biggest)
    what = "not in a git repository, so every file under it counts; " if not found.in_git else ""
    over = (
        f"over {MAX_FILES:,} files"
        if len(found.entries) > MAX_FILES
        else f"over snapshot.max_mb ({max_mb} MB)"
    )
    return ConfigError(
        f"a snapshot of {found.folder} would copy {_mb(found.size)} or more in"
        f" {len(found.entries):,}+ files, {over}; {what}the biggest: {named}",
        file=file,
        key="snapshot",
        fix="ignore or move what the job does not need (.gitignore), run from the folder"
        " that holds the code, or raise the limit with snapshot: {max_mb: N}",
    )


def _mb(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB"


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    else:
        shutil.rmtree(path)
