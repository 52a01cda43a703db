"""A private Lepton emulator for the Lepton rows, and a counter of the HTTP calls made to it.

The emulator is the same server `scripts/devstack up` runs, started here in its own
process with a fresh workspace: call counts and list pages then depend only on what the
benchmark created, not on what earlier test runs left in devstack's workspace, and the
client's timings do not share a GIL with the server. Every job whose name starts with
`bench-` is held in Queueing (the emulator's `stuck_queue` fault), so a thousand tracked
jobs start no processes.

Calls are counted on the client side, at `httpx.Client.send`: every request anylaunch
sends, retries included, is one call.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

HELD = {"kind": "stuck_queue", "job": "bench-*"}
_ID = re.compile(r"/jobs/[^/?]+")


class PrivateEmulator:
    """`lepton-emulator` (the emulator's own command, beside this Python) on a free
    loopback port, ended on exit."""

    def __init__(self) -> None:
        self.token = "emu-" + secrets.token_hex(12)
        self._dir = tempfile.TemporaryDirectory(prefix="bench-lepton-")
        self._proc: subprocess.Popen[str] | None = None
        self.url = ""

    def __enter__(self) -> PrivateEmulator:
        command = Path(sys.executable).parent / "lepton-emulator"
        if not command.exists():
            raise RuntimeError(f"no {command}: pip install -e emulator/ (the Lepton emulator)")
        argv = [str(command), "--port", "0",
                "--workspace", "ws-bench", "--state-dir", str(Path(self._dir.name) / "state"),
                "--fault", json.dumps(HELD)]  # fmt: skip
        self._proc = subprocess.Popen(
            argv,
            env={**os.environ, "LEPTON_EMULATOR_TOKEN": self.token},
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        line = self._proc.stdout.readline() if self._proc.stdout else ""
        if not line.startswith("{"):
            self.__exit__()
            raise RuntimeError("the Lepton emulator did not start")
        self.url = json.loads(line)["url"]
        return self

    def env(self) -> dict[str, str]:
        return {
            "LEPTON_WORKSPACE_URL": self.url,
            "LEPTON_WORKSPACE_ID": "ws-bench",
            "LEPTON_AUTH_TOKEN": self.token,
        }

    def __exit__(self, *_: object) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._dir.cleanup()


@contextmanager
def counting_http(rtt_s: float = 0.0) -> Iterator[Counter[str]]:
    """Count every request any httpx.Client sends in this process, by `METHOD /route`.

    `rtt_s` adds a simulated network round trip to each request (a sleep, which releases
    the GIL as waiting on a socket does): loopback answers in ~2 ms, a real gateway does not.
    """
    calls: Counter[str] = Counter()
    lock = threading.Lock()
    original = httpx.Client.send

    def send(self: httpx.Client, request: httpx.Request, **kwargs: object) -> httpx.Response:
        route = request.url.path.split("/workspaces/", 1)[-1].split("/", 1)[-1]
        with lock:
            calls[f"{request.method} /{_ID.sub('/jobs/{id}', route)}"] += 1
        if rtt_s:
            time.sleep(rtt_s)
        return original(self, request, **kwargs)  # type: ignore[arg-type]

    httpx.Client.send = send  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        httpx.Client.send = original  # type: ignore[method-assign]
