"""Which code a job ran: the git repository, commit, branch and dirty flag of the folder
its code comes from, read once per submission (all splits of a run share it).

A submit never fails for it: no git, a folder outside any repository, or a git that
takes longer than `TIMEOUT_S`, and the job simply records no source. git is asked not to
take its optional locks (GIT_OPTIONAL_LOCKS=0): `git status` would otherwise refresh the
index and could collide with the user's own git command running at the same moment.
"""

from __future__ import annotations

import os
import re
import subprocess
from typing import Any

TIMEOUT_S = 5.0
# Credentials written into a remote's URL (https://user:token@host/...) stay out of the
# store: only the scheme and what follows the `@` are kept.
_USERINFO = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@]*@")


def read(folder: str) -> dict[str, Any] | None:
    """{repo, commit, branch, dirty} of `folder`, or None when it is not in a git
    repository (or git cannot say).

    `repo` is the `origin` remote's URL, credentials removed, else the repository's own
    folder; `branch` is None on a detached HEAD, `commit` None before the first commit;
    `dirty` is whether tracked files differ from the commit (staged or not). Untracked
    files do not make it dirty: a snapshot's hash covers them.
    """
    status = _git(folder, "status", "--porcelain=v2", "--branch", "--untracked-files=no")
    if status is None:
        return None
    commit = branch = None
    dirty = False
    for line in status.splitlines():
        if line.startswith("# branch.oid "):
            oid = line.split(" ", 2)[2]
            commit = None if oid.startswith("(") else oid
        elif line.startswith("# branch.head "):
            head = line.split(" ", 2)[2]
            branch = None if head.startswith("(") else head
        elif line and not line.startswith("#"):
            dirty = True
    url = _git(folder, "config", "--get", "remote.origin.url")
    repo = _USERINFO.sub(r"\g<scheme>", url.strip()) if url and url.strip() else None
    if repo is None:
        top = _git(folder, "rev-parse", "--show-toplevel")
        repo = top.strip() if top else None
    return {"repo": repo, "commit": commit, "branch": branch, "dirty": dirty}


def _git(folder: str, *args: str) -> str | None:
    """git's output, or None when it is missing, fails or takes too long."""
    try:
        proc = subprocess.run(
            ["git", "-C", folder, *args],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=TIMEOUT_S,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"},
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None
