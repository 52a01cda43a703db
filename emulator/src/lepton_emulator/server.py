"""Serving the emulator: `lepton-emulator` (foreground) or `Emulator` (a thread).

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

from lepton_emulator.app import build
from lepton_emulator.network import parse_endpoint
from lepton_emulator.world import World

DEFAULT_WORKSPACE = "ws-emulator"


def loopback_socket(host: str, port: int) -> socket.socket:
    if not ipaddress.ip_address(socket.gethostbyname(host)).is_loopback:
        raise ValueError(f"{host} is not a loopback address — the emulator serves 127.0.0.1 only")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


class Server:
    """One emulator server on a free loopback port in this process, serving workspaces.

    Each workspace (`open()`) is a World of its own: its token, jobs, secrets, faults and
    replica files. A test suite starts one server and opens a workspace per test, so no
    test sees another's state and none waits for a server to start or stop.
    """

    def __init__(self, *, port: int = 0) -> None:
        self.worlds: dict[str, World] = {}
        self._sock = loopback_socket("127.0.0.1", port)
        self.port = self._sock.getsockname()[1]
        config = uvicorn.Config(build(self.worlds), log_level="warning", lifespan="off", ws="none")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )
        self._lock = threading.Lock()

    def start(self) -> Server:
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the Lepton emulator did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        """Stop serving and end every replica of every workspace still open."""
        self._server.should_exit = True
        self._thread.join(timeout=10)
        for world in list(self.worlds.values()):
            world.shutdown()
        self.worlds.clear()

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def open(
        self,
        *,
        workspace: str | None = None,
        token: str | None = None,
        state_dir: Path | None = None,
        seed: int | None = None,
        outside: Sequence[str] = (),
    ) -> Workspace:
        """A new workspace served here (closed with `close()` or as a context manager).

        `outside`: host endpoints (HOST:PORT or URLs on loopback) its jobs may reach, such
        as the S3 server; nothing else of this machine is reachable from a job."""
        return Workspace(self, workspace, token, state_dir, seed, outside)

    def _add(self, world: World, wanted: str | None) -> None:
        with self._lock:
            name, n = wanted or DEFAULT_WORKSPACE, 1
            while wanted is None and name in self.worlds:
                n += 1
                name = f"{DEFAULT_WORKSPACE}-{n}"
            if name in self.worlds:
                raise ValueError(f"workspace {name} is already served here")
            world.workspace = name
            self.worlds[name] = world


class Workspace:
    """One emulated workspace of a Server: what a client, a test or a notebook uses.

    with server.open() as emu:
        os.environ.update(emu.env())
        emu.add_fault(kind="oom", job="big-*")
    """

    def __init__(
        self,
        server: Server,
        workspace: str | None,
        token: str | None,
        state_dir: Path | None,
        seed: int | None,
        outside: Sequence[str],
    ) -> None:
        self.server = server
        self.token = token or "emu-" + secrets.token_hex(12)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        root = state_dir
        if root is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="lepton-emu-")
            root = Path(self._tmp.name)
        self.world = World(
            workspace or DEFAULT_WORKSPACE,
            {self.token},
            root,
            seed,
            [parse_endpoint(o) for o in outside],
        )
        server._add(self.world, workspace)
        self.world.start()

    @property
    def port(self) -> int:
        return self.server.port

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

    def close(self) -> None:
        """End every replica of this workspace and stop serving it."""
        self.server.worlds.pop(self.world.workspace, None)
        self.world.shutdown()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def add_fault(self, **fault: Any) -> None:
        set_faults(self.url, self.token, [fault])

    def clear_faults(self) -> None:
        clear_faults(self.url, self.token)


class Emulator(Workspace):
    """A server of its own with one workspace, for a test that needs the server itself
    (two emulators on one machine) and for notebooks.

    with Emulator() as emu:
        os.environ.update(emu.env())
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
        self._own = Server(port=port)
        self._args = (workspace, token, state_dir, seed, outside)

    def start(self) -> Emulator:
        self._own.start()
        try:
            super().__init__(self._own, *self._args)
        except BaseException:
            self._own.stop()
            raise
        return self

    def stop(self) -> None:
        self.close()
        self._own.stop()

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


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
    from lepton_emulator.faults import Fault

    world = World(workspace, {token}, state_dir, None, [parse_endpoint(o) for o in outside])
    world.faults.add([Fault.model_validate(f) for f in faults or []])
    sock = loopback_socket(host, port)
    bound = sock.getsockname()[1]
    world.start()
    info = {"url": f"http://{host}:{bound}/api/v2/workspaces/{workspace}", "workspace": workspace}
    print(json.dumps(info), flush=True)
    try:
        uvicorn.Server(
            uvicorn.Config(
                build({workspace: world}), log_level="warning", lifespan="off", ws="none"
            )
        ).run(sockets=[sock])
    finally:
        world.shutdown()
