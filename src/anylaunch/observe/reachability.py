"""Whether a backend's controller answered the last poll, and since when it has not.

A poll that gets no answer (slurmctld down, a squeue killed at its deadline) keeps the
last known states and marks them stale; the moment the controller stopped answering is
kept next to the store, so every later `ps` and `status` can say "since when" until a
poll gets an answer again.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

from anylaunch.errors import BackendError

_FILE = "unreachable.json"


class Unreachable(BackendError):
    """The controller did not answer a poll; `observed` is what was learned anyway
    (e.g. from accounting), every other polled job keeps its last known state."""

    code = "UNREACHABLE"

    def __init__(self, message: str, observed: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.observed = observed or {}


def _read(root: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads((root / _FILE).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        k: v
        for k, v in data.items()
        if isinstance(v, dict) and isinstance(v.get("since"), int | float)
    }


def _write(root: Path, data: dict[str, dict[str, Any]]) -> None:
    path = root / _FILE
    if not data:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_name(f"{_FILE}.{os.getpid()}")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)  # readers see the old file or the new one, never half of one


def down(root: Path, backend: str, reason: str) -> str:
    """Note that `backend` did not answer; the line saying since when it has not."""
    data = _read(root)
    since = float(data.get(backend, {}).get("since", time.time()))
    data[backend] = {"since": since, "reason": reason}
    # A read-only store still shows the stale states, only without the memory.
    with contextlib.suppress(OSError):
        _write(root, data)
    return line(backend, since, reason)


def note(root: Path, backend: str) -> str | None:
    """The line for `backend` if its last poll got no answer, else None."""
    entry = _read(root).get(backend)
    if entry is None:
        return None
    return line(backend, float(entry["since"]), str(entry.get("reason", "no answer")))


def up(root: Path, backend: str) -> None:
    """Forget a past outage of `backend`: it answered."""
    data = _read(root)
    if data.pop(backend, None) is not None:
        with contextlib.suppress(OSError):
            _write(root, data)


def line(backend: str, since: float, reason: str) -> str:
    """The one line `ps` and `status` print above stale states."""
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(since))
    return (
        f"{backend} controller unreachable since {when} ({reason}); states shown are the last known"
    )
