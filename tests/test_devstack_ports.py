"""scripts/devstack.d/_ports.sh: each checkout's devstack gets ports of its own and keeps them."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIB = ROOT / "scripts" / "devstack.d" / "_ports.sh"


def port(state: Path, claims: Path, *args: str) -> int:
    done = subprocess.run(
        ["bash", "-c", f'set -euo pipefail; . "{LIB}"; devstack_port "$@"', "-", str(state), *args],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "DEVSTACK_CLAIMS_DIR": str(claims)},
        check=True,
    )
    return int(done.stdout)


def test_two_checkouts_get_different_ports_and_each_keeps_its_own(tmp_path):
    a, b, claims = tmp_path / "a", tmp_path / "b", tmp_path / "claims"
    a.mkdir(), b.mkdir()
    first = port(a, claims, "slurmd", "2")
    other = port(b, claims, "slurmd", "2")
    assert {first, first + 1}.isdisjoint({other, other + 1})
    assert port(a, claims, "slurmd", "2") == first  # remembered: a second up finds it
    assert (a / "ports").read_text() == f"slurmd={first}\n"
    assert 20000 <= first < 32000 and 20000 <= other < 32000


def test_a_remembered_port_another_process_took_is_replaced_when_starting(tmp_path):
    state, claims = tmp_path / "state", tmp_path / "claims"
    state.mkdir()
    first = port(state, claims, "s3")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", first))
        holder.listen()
        assert port(state, claims, "s3") == first  # status and down read it back as is
        moved = port(state, claims, "s3", "1", "fresh")
    assert moved != first
    assert (state / "ports").read_text() == f"s3={moved}\n"
