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


@pytest.fixture
def sleeping_job(cli_inproc, devstack, write):
    """A `sleep 300` job on the live controller, cancelled when the test ends: its id."""
    path = write("name: stale-demo\nlauncher: none\ncommand: sleep 300\n")
    live = {"SLURM_CONF": devstack["SLURM_CONF"]}
    started = cli_inproc("run", str(path), "--backend", "slurm", "--detach", "--json", env=live)
    assert started.rc == 0, started.out + started.err
    job_id = started.json()["id"]
    yield job_id
    cli_inproc("cancel", job_id, env=live)


def test_a_silent_controller_shows_last_known_states_marked_stale(
    cli_inproc, devstack, dead_conf, sleeping_job
):
    live = {"SLURM_CONF": devstack["SLURM_CONF"]}
    dead = {"SLURM_CONF": dead_conf}
    job_id = sleeping_job
    for _ in range(120):
        known = cli_inproc("status", job_id, "--json", env=live).json()["state"]
        if known == "RUNNING":
            break
        time.sleep(1)
    assert known in ("PENDING", "RUNNING"), known

    listed = cli_inproc("ps", env=dead)
    assert listed.rc == 0, listed.err
    row = next(line for line in listed.out.splitlines() if line.startswith(job_id))
    assert f"{known} (stale)" in row, listed.out
    lines = [line for line in listed.err.splitlines() if "unreachable" in line]
    assert len(lines) == 1, listed.err
    since = re.search(r"slurm controller unreachable since ([0-9: -]+ UTC)", lines[0])
    assert since, lines[0]

    shown = cli_inproc("status", job_id, env=dead)
    assert shown.rc == 0, shown.err
    assert f"{known} (stale)" in shown.out, shown.out
    assert f"unreachable since {since.group(1)}" in shown.err, shown.err

    as_json = cli_inproc("status", job_id, "--json", env=dead)
    assert as_json.rc == 0 and as_json.json()["state"] == known, as_json.out

    back = cli_inproc("ps", env=live)
    assert "(stale)" not in back.out and "unreachable" not in back.err, back.out + back.err


def test_json_output_marks_the_last_known_states_stale_while_the_controller_is_silent(
    cli_inproc, devstack, dead_conf, sleeping_job
):
    live = {"SLURM_CONF": devstack["SLURM_CONF"]}
    dead = {"SLURM_CONF": dead_conf}
    job_id = sleeping_job
    fresh = cli_inproc("status", job_id, "--json", env=live).json()
    assert fresh["stale"] is None, fresh

    shown = cli_inproc("status", job_id, "--json", env=dead)
    assert shown.rc == 0, shown.err
    assert shown.json()["state"] in ("PENDING", "RUNNING")
    assert "slurm controller unreachable since" in shown.json()["stale"], shown.out

    listed = cli_inproc("ps", "--json", env=dead)
    assert listed.rc == 0, listed.err
    row = next(r for r in listed.json() if r["id"] == job_id)
    assert "slurm controller unreachable since" in row["stale"], row

    back = next(r for r in cli_inproc("ps", "--json", env=live).json() if r["id"] == job_id)
    assert back["stale"] is None, back


def test_the_orphan_check_waits_no_longer_than_a_poll(devstack, dead_conf, tmp_path, monkeypatch):
    """A job recorded but never given a Slurm id is looked for by its comment during a
    poll; with slurmctld silent that squeue gets the poll's deadline, not a submit's."""
    from anylaunch.backends.slurm import commands, parse
    from anylaunch.observe import watch
    from anylaunch.state import State
    from anylaunch.store import JobRecord, Store

    monkeypatch.setenv("SLURM_CONF", dead_conf)
    asked: list[tuple[str, float]] = []
    real_run = commands.run

    def run(argv, **kwargs):
        asked.append((" ".join(argv), kwargs.get("timeout", commands.TIMEOUT_S)))
        return real_run(argv, **kwargs)

    monkeypatch.setattr(commands, "run", run)
    store = Store(tmp_path / "home")
    orphan = JobRecord(id="orphan01", name="o", backend="slurm", state=State.PENDING, job_dir="x")
    store.add(orphan)
    [after] = watch.refresh([store.get("orphan01")], store)
    assert after.native_id is None and after.state is State.PENDING
    comment_queries = [t for argv, t in asked if argv == " ".join(parse.comment_argv())]
    assert comment_queries, asked
    assert all(t <= commands.POLL_DEADLINE_S for t in comment_queries), asked
    store.close()


def test_orphans_are_not_looked_for_while_the_controller_is_known_silent(
    devstack, dead_conf, tmp_path, monkeypatch
):
    from anylaunch.backends.slurm import commands, parse
    from anylaunch.observe import reachability, watch
    from anylaunch.state import State
    from anylaunch.store import JobRecord, Store

    monkeypatch.setenv("SLURM_CONF", dead_conf)
    asked: list[str] = []
    real_run = commands.run

    def run(argv, **kwargs):
        asked.append(" ".join(argv))
        return real_run(argv, **kwargs)

    monkeypatch.setattr(commands, "run", run)
    store = Store(tmp_path / "home")
    store.add(JobRecord(id="orphan02", name="o", backend="slurm", state=State.PENDING, job_dir="x"))
    reachability.down(store.root, "slurm", "squeue did not answer")
    watch.refresh([store.get("orphan02")], store)
    assert " ".join(parse.comment_argv()) not in asked, asked
    reachability.up(store.root, "slurm")
    watch.refresh([store.get("orphan02")], store)
    assert " ".join(parse.comment_argv()) in asked, asked
    store.close()
