"""Transfer progress: a bar for people at a terminal, periodic lines in job logs."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

MiB = 1024 * 1024


class Progress:
    """Thread-safe byte counter fed by transfer callbacks from many threads."""

    def __init__(
        self, label: str, total_bytes: int, total_files: int, *, every_s: float = 5.0
    ) -> None:
        self.label, self.total, self.files = label, total_bytes, total_files
        self.done_bytes = 0
        self.done_files = 0
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._every = every_s
        self._last_line = self.started
        self._bar: Any = None
        if sys.stderr.isatty() and total_bytes:
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                TransferSpeedColumn,
            )
            from rich.progress import Progress as Bar

            self._bar = Bar(
                "{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn()
            )
            self._task = self._bar.add_task(label, total=total_bytes)
            self._bar.start()

    def bytes(self, count: int) -> None:
        with self._lock:
            self.done_bytes += count
            if self._bar is not None:
                self._bar.update(self._task, advance=count)
            elif time.monotonic() - self._last_line >= self._every:
                self._last_line = time.monotonic()
                self._line()

    def file_done(self) -> None:
        with self._lock:
            self.done_files += 1

    def _line(self) -> None:
        elapsed = max(time.monotonic() - self.started, 1e-6)
        print(
            f"anylaunch-stage: {self.label}: {self.done_files}/{self.files} files,"
            f" {self.done_bytes / MiB:.1f}/{self.total / MiB:.1f} MiB,"
            f" {self.done_bytes / MiB / elapsed:.1f} MiB/s",
            file=sys.stderr,
            flush=True,
        )

    def close(self) -> float:
        """Stop the bar, print the final line, return the elapsed seconds."""
        if self._bar is not None:
            self._bar.stop()
        self._line()
        return time.monotonic() - self.started
