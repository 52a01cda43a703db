"""A Slurm controller that does not answer: `ps` and `status` show the last known states,
marked stale, with one line saying since when the controller has been unreachable.

No mock: a real squeue and sacct talk to a copy of the devstack's slurm.conf whose
controller and accounting ports nobody listens on (stopping the shared slurmctld would
disturb everyone else using the devstack).
"""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path

import pytest


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def dead_conf(devstack, tmp_path) -> str:
    """The devstack's slurm.conf with its controller and accounting on closed ports."""
    text = Path(devstack["SLURM_CONF"]).read_text()
    text = re.sub(r"(?m)^SlurmctldPort=.*$", f"SlurmctldPort={closed_port()}", text)
    text = re.sub(r"(?m)^AccountingStoragePort=.*$", f"AccountingStoragePort={closed_port()}", text)
    path = tmp_path / "dead" / "slurm.conf"
    path.parent.mkdir()
    path.write_text(text)
    return str(path)


def test_a_silent_controller_shows_last_known_states_marked_stale(cli, devstack, dead_conf, write):
    live = {"SLURM_CONF": devstack["SLURM_CONF"]}
    dead = {"SLURM_CONF": dead_conf}
    path = write("name: stale-demo\nlauncher: none\ncommand: sleep 300\n")
    started = cli("run", str(path), "--backend", "slurm", "--detach", "--json", env=live)
    assert started.rc == 0, started.out + started.err
    job_id = started.json()["id"]
    try:
        for _ in range(120):
            known = cli("status", job_id, "--json", env=live).json()["state"]
            if known == "RUNNING":
                break
            time.sleep(1)
        assert known in ("PENDING", "RUNNING"), known

        listed = cli("ps", env=dead)
        assert listed.rc == 0, listed.err
        row = next(line for line in listed.out.splitlines() if line.startswith(job_id))
        assert f"{known} (stale)" in row, listed.out
        lines = [line for line in listed.err.splitlines() if "unreachable" in line]
        assert len(lines) == 1, listed.err
        since = re.search(r"slurm controller unreachable since ([0-9: -]+ UTC)", lines[0])
        assert since, lines[0]

        shown = cli("status", job_id, env=dead)
        assert shown.rc == 0, shown.err
        assert f"{known} (stale)" in shown.out, shown.out
        assert f"unreachable since {since.group(1)}" in shown.err, shown.err

        as_json = cli("status", job_id, "--json", env=dead)
        assert as_json.rc == 0 and as_json.json()["state"] == known, as_json.out

        back = cli("ps", env=live)
        assert "(stale)" not in back.out and "unreachable" not in back.err, back.out + back.err
    finally:
        cli("cancel", job_id, env=live)
