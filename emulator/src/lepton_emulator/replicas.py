"""One replica of an emulated job: a real local process and everything it printed.

The process starts in its own session so the emulator can end its whole tree (torchrun
and the ranks it spawned) the way a node kills a pod: SIGTERM, a grace period, SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil


@dataclass
class Replica:
    id: str
    index: int
    node: str
    address: str
    blocked: str | None = None  # "image_pull", "never_ready", "mount_error": no process
    proc: subprocess.Popen[bytes] | None = None
    started_at: float | None = None
    exit_code: int | None = None
    killed_for: str | None = None  # "oom", "evict", "stop": why the emulator ended it
    forced_exit: int | None = None  # the exit status an "exit" fault imposes
    restarts: int = 0
    lines: list[tuple[int, str]] = field(default_factory=list)  # (ns timestamp, text)
    _reader: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.exit_code is None

    @property
    def ready(self) -> bool:
        # Like a readiness probe: a replica counts as ready a moment after it started.
        return self.running and self.started_at is not None and time.time() - self.started_at > 0.2

    def start(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        cwd.mkdir(parents=True, exist_ok=True)
        self.exit_code, self.killed_for = None, None
        self.started_at = time.time()
        try:
            self.proc = subprocess.Popen(
                argv,
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            self.lines.append((time.time_ns(), f"exec failed: {exc}"))
            self.exit_code = 127
            return
        self._reader = threading.Thread(target=self._read, args=(self.proc,), daemon=True)
        self._reader.start()

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            self.lines.append((time.time_ns(), raw.decode("utf-8", "replace").rstrip("\n")))
        proc.stdout.close()

    def reap(self) -> bool:
        """Record the exit status once the process and its output are done; True if it ended now."""
        if self.proc is None or self.exit_code is not None:
            return False
        code = self.proc.poll()
        if code is None:
            return False
        if self._reader is not None:
            self._reader.join(timeout=2)
        self.exit_code = 128 - code if code < 0 else code  # killed by signal N -> 128+N
        return True

    def kill(self, reason: str, grace: float = 0.0) -> None:
        """End the replica's whole process tree; `grace` > 0 sends SIGTERM first."""
        if not self.running or self.proc is None:
            return
        self.killed_for = reason
        try:
            root = psutil.Process(self.proc.pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return
        if grace > 0:
            for proc in tree:
                with contextlib.suppress(psutil.NoSuchProcess):
                    proc.terminate()
            _, tree = psutil.wait_procs(tree, timeout=grace)
        for proc in tree:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, 9)

    def text(self) -> str:
        return "".join(line + "\n" for _, line in list(self.lines))
