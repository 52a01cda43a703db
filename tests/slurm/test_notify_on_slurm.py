"""`notify:` on Slurm: the job announces its own end from inside its allocation, with
nothing of ours running on the submit side, and the next poll records its receipt."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from tests.helpers import wait_until
from tests.notify.receiver import Receiver

pytestmark = pytest.mark.usefixtures("leave_no_job_behind")


def test_a_detached_slurm_job_announces_its_own_end_once(cli_inproc, write, home):
    receiver = Receiver(refuse=1)
    try:
        env = {"NOTIFY_URL": receiver.url, "HF_TOKEN": "hf_slurm_notify_5ecret"}
        path = write(
            "name: self-announced\nlauncher: none\n"
            "command: bash -c 'echo $HF_TOKEN; exit 3'\n"
            'env: {HF_TOKEN: "${HF_TOKEN}"}\n'
            "notify:\n  - url: ${NOTIFY_URL}\n    on: [FAILED]\nslurm: {}\n"
        )
        with pytest.MonkeyPatch.context() as patch:
            for name, value in env.items():
                patch.setenv(name, value)
            job = cli_inproc("run", str(path), "--detach", "--json").json()
        # No command runs until the receiver has the message: the job sent it.
        wait_until(lambda: receiver.accepted(), 120, "the job's own announcement")
        (message,) = receiver.accepted()
        assert f"FAILED: job self-announced ({job['id']}) on slurm" in message["text"]
        assert "exit code 3" in message["text"] and "hf_slurm_notify_5ecret" not in str(message)
        body = message["blocks"][0]["text"]["text"]
        assert f"Why: anylaunch diagnose {job['id']}" in body
        assert "[node 0] ***" in body  # its last line, the secret it printed masked
        wait_until(
            lambda: cli_inproc("status", job["id"], "--json").json()["state"] == "FAILED",
            120,
            "the end in the store",
        )
        db = sqlite3.connect(home / "jobs.db")
        assert db.execute("SELECT status, by, state FROM notifications").fetchall() == [
            ("sent", "job", "FAILED")
        ]
        assert cli_inproc("ps").rc == 0 and len(receiver.accepted()) == 1
        assert len(receiver.tries) == 2
    finally:
        receiver.close()


def test_a_slurm_job_that_cannot_announce_itself_is_announced_by_the_next_command(
    cli_inproc, write, home
):
    # A cancelled job's batch shell is killed with it: no receipt, so the command that
    # sees the end announces it, once, with the diagnosis.
    receiver = Receiver()
    try:
        path = write(
            "name: stopped\nlauncher: none\ncommand: sleep 300\n"
            "notify:\n  - url: ${NOTIFY_URL}\n    on: [CANCELLED]\nslurm: {}\n"
        )
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("NOTIFY_URL", receiver.url)
            job = cli_inproc("run", str(path), "--detach", "--json").json()
            wait_until(
                lambda: cli_inproc("status", job["id"], "--json").json()["state"] == "RUNNING",
                60,
                "the job running",
            )
            assert cli_inproc("cancel", job["id"], "--json").json()["state"] == "CANCELLED"
            wait_until(lambda: receiver.accepted(), 30, "the command's announcement")
            assert cli_inproc("ps").rc == 0
        (message,) = receiver.accepted()
        assert f"CANCELLED: job stopped ({job['id']}) on slurm" in message["text"]
        db = sqlite3.connect(home / "jobs.db")
        assert db.execute("SELECT status, by FROM notifications").fetchall() == [
            ("sent", "command")
        ]
    finally:
        receiver.close()


def test_what_a_slurm_job_could_not_deliver_the_next_command_delivers(cli_inproc, write, home):
    receiver = Receiver(refuse=1000)  # down while the job tries at its end
    try:
        path = write(
            "name: unheard\nlauncher: none\ncommand: bash -c 'exit 4'\n"
            "notify:\n  - url: ${NOTIFY_URL}\n    on: [FAILED]\nslurm: {}\n"
        )
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("NOTIFY_URL", receiver.url)
            job = cli_inproc("run", str(path), "--detach", "--json").json()
            wait_until(lambda: len(receiver.tries) == 4, 120, "the job's four tries")
            receiver.refuse = 0
            wait_until(
                lambda: cli_inproc("status", job["id"], "--json").json()["state"] == "FAILED",
                120,
                "the end in the store",
            )
            wait_until(lambda: cli_inproc("ps").rc == 0 and receiver.accepted(), 30, "a resend")
        (message,) = receiver.accepted()
        assert f"FAILED: job unheard ({job['id']}) on slurm" in message["text"]
        assert "exit code 4" in message["text"]
        log = (Path(job["job_dir"]) / "logs" / "node-0.log").read_text()
        assert "anylaunch: notify target 0: webhook answered HTTP 503" in log
        db = sqlite3.connect(home / "jobs.db")
        assert db.execute("SELECT status, by FROM notifications").fetchall() == [
            ("sent", "command")
        ]
    finally:
        receiver.close()
