"""A fresh emulated workspace per test, on the run's one emulator server, with the
client's three variables set."""

from __future__ import annotations

import pytest


@pytest.fixture
def emulator(lepton_server, tmp_path, monkeypatch, home):
    """A fresh emulated workspace; the client finds it through the environment."""
    with lepton_server.open(state_dir=tmp_path / "emulator", seed=7) as emu:
        for key, value in emu.env().items():
            monkeypatch.setenv(key, value)
        monkeypatch.delenv("NGC_KEY", raising=False)
        yield emu


@pytest.fixture
def lcli(cli_inproc, emulator):
    """The real CLI, in this process, pointed at the emulator (a Lepton job starts no
    process here: the emulator's replicas are its own)."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 180):
        return cli_inproc(*args, env={**emulator.env(), **(env or {})}, timeout=timeout)

    return run


@pytest.fixture
def lcli_proc(cli, emulator):
    """`lcli` in a subprocess, for commands that leave a process behind (a workflow's
    controller)."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 180):
        return cli(*args, env={**emulator.env(), **(env or {})}, timeout=timeout)

    return run
