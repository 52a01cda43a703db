"""Serving the emulator: `anylaunch lepton-emulator` (foreground) or `Emulator` (a thread).

Loopback only: the emulator runs arbitrary job commands as local processes, so it must
never listen where another machine could reach it.
"""

from __future__ import annotations

import ipaddress
import json
import secrets
import socket
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from anylaunch.lepton_emulator.app import build
from anylaunch.lepton_emulator.network import parse_endpoint
from anylaunch.lepton_emulator.world import World

DEFAULT_WORKSPACE = "ws-emulator"


def loopback_socket(host: str, port: int) -> socket.socket:
    if not ipaddress.ip_address(socket.gethostbyname(host)).is_loopback:
        raise ValueError(f"{host} is not a loopback address — the emulator serves 127.0.0.1 only")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


class Emulator:
    """An emulator on a free loopback port in this process, for tests and notebooks.

    with Emulator() as emu:
        os.environ.update(emu.env())
        emu.add_fault(kind="oom", job="big-*")
    """

    def __init__(
        self,
        *,
        port: int = 0,
        workspace: str = DEFAULT_WORKSPACE,
        token: str | None = None,
        state_dir: Path | None = None,
        seed: int | None = None,
        outside: Sequence[str] = (),
    ) -> None:
        """`outside`: host endpoints (HOST:PORT or URLs on loopback) jobs may reach, such as
        the S3 server; nothing else of this machine is reachable from a job."""
        self.token = token or "emu-" + secrets.token_hex(12)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        root = state_dir
        if root is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="lepton-emu-")
            root = Path(self._tmp.name)
        self.world = World(
            workspace, {self.token}, root, seed, [parse_endpoint(o) for o in outside]
        )
        self._sock = loopback_socket("127.0.0.1", port)
        self.port = self._sock.getsockname()[1]
        config = uvicorn.Config(build(self.world), log_level="warning", lifespan="off", ws="none")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v2/workspaces/{self.world.workspace}"

    def env(self) -> dict[str, str]:
        """The three variables a client needs to use this emulator as its workspace."""
        return {
            "LEPTON_WORKSPACE_URL": self.url,
            "LEPTON_WORKSPACE_ID": self.world.workspace,
            "LEPTON_AUTH_TOKEN": self.token,
        }

    def start(self) -> Emulator:
        self.world.start()
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the Lepton emulator did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self.world.shutdown()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def add_fault(self, **fault: Any) -> None:
        set_faults(self.url, self.token, [fault])

    def clear_faults(self) -> None:
        clear_faults(self.url, self.token)


def _control(url: str) -> str:
    return url.split("/api/v2/", 1)[0] + "/_emulator/faults"


def set_faults(url: str, token: str, faults: list[dict[str, Any]]) -> None:
    """Switch faults on in a running emulator (by its workspace URL)."""
    resp = httpx.post(
        _control(url), json=faults, headers={"Authorization": f"Bearer {token}"}, timeout=10
    )
    resp.raise_for_status()


def clear_faults(url: str, token: str) -> None:
    httpx.delete(
        _control(url), headers={"Authorization": f"Bearer {token}"}, timeout=10
    ).raise_for_status()


def serve(
    *,
    host: str,
    port: int,
    workspace: str,
    token: str,
    state_dir: Path,
    faults: list[dict[str, Any]] | None = None,
    outside: Sequence[str] = (),
) -> None:
    """Run in the foreground until SIGINT/SIGTERM, then end every replica."""
    from anylaunch.lepton_emulator.faults import Fault

    world = World(workspace, {token}, state_dir, None, [parse_endpoint(o) for o in outside])
    world.faults.add([Fault.model_validate(f) for f in faults or []])
    sock = loopback_socket(host, port)
    bound = sock.getsockname()[1]
    world.start()
    info = {"url": f"http://{host}:{bound}/api/v2/workspaces/{workspace}", "workspace": workspace}
    print(json.dumps(info), flush=True)
    try:
        uvicorn.Server(
            uvicorn.Config(build(world), log_level="warning", lifespan="off", ws="none")
        ).run(sockets=[sock])
    finally:
        world.shutdown()
