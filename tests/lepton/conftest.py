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
def lcli(cli, emulator):
    """The real CLI in a subprocess, pointed at the emulator."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 180):
        return cli(*args, env={**emulator.env(), **(env or {})}, timeout=timeout)

    return run
