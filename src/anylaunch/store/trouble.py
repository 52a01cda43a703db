"""SQLite's errors as one line that names the file and what to do about it."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from anylaunch.errors import StoreError


class _OnFile(Protocol):
    path: Path  # the database file, named in errors


_S = TypeVar("_S", bound=_OnFile)
_P = ParamSpec("_P")
_R = TypeVar("_R")


def store_trouble(
    method: Callable[Concatenate[_S, _P], _R],
) -> Callable[Concatenate[_S, _P], _R]:
    """SQLite's errors as one line that names the file and what to do about it."""

    @functools.wraps(method)
    def wrapper(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as exc:
            raise StoreError(explain(self.path, exc)) from None

    return wrapper


def explain(path: Path, exc: sqlite3.Error) -> str:
    why = " ".join(str(exc).split()) or type(exc).__name__
    name = getattr(exc, "sqlite_errorname", "")
    if "READONLY" in name or "readonly" in why:
        fix = (
            f"make it writable (chmod u+w {path}; an immutable file: lsattr, chattr -i)"
            " or set ANYLAUNCH_HOME to a writable folder"
        )
    elif "CORRUPT" in name or "NOTADB" in name or "not a database" in why or "malformed" in why:
        fix = (
            f"move it aside (mv {path} {path}.damaged) and anylaunch starts a new store;"
            f" the old one stays for recovery (sqlite3 {path}.damaged .recover)"
        )
    elif "CANTOPEN" in name or "unable to open" in why:
        fix = f"check that {path.parent} is a folder you can write, or set ANYLAUNCH_HOME"
    elif "FULL" in name or "IOERR" in name:
        fix = f"check the disk that holds {path.parent} (space, errors)"
    else:
        fix = "check the file, or set ANYLAUNCH_HOME to another folder"
    return f"job store {path}: {why} — {fix}"
