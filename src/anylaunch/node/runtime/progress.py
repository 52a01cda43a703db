"""Progress of a transfer: one line in the job's log every 5 seconds, and one at the end."""

from __future__ import annotations

import sys
import threading
import time

MiB = 1024 * 1024


class Progress:
    """A byte counter fed from many threads."""

    def __init__(
        self, label: str, total_bytes: int, total_files: int, every_s: float = 5.0
    ) -> None:
        self.label, self.total, self.files = label, total_bytes, total_files
        self.done_bytes = self.done_files = 0
        self.started = self._last = time.monotonic()
        self._every = every_s
        self._lock = threading.Lock()

    def bytes(self, count: int) -> None:
        with self._lock:
            self.done_bytes += count
            if time.monotonic() - self._last >= self._every:
                self._last = time.monotonic()
                self._line()

    def file_done(self) -> None:
        with self._lock:
            self.done_files += 1

    def _line(self) -> None:
        elapsed = max(time.monotonic() - self.started, 1e-6)
        sys.stderr.write(
            f"anylaunch-stage: {self.label}: {self.done_files}/{self.files} files,"
            f" {self.done_bytes / MiB:.1f}/{self.total / MiB:.1f} MiB,"
            f" {self.done_bytes / MiB / elapsed:.1f} MiB/s\n"
        )
        sys.stderr.flush()

    def close(self) -> float:
        with self._lock:
            self._line()
        return time.monotonic() - self.started
