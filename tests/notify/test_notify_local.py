"""`notify:` on the local backend: a job's end reaches a real webhook on loopback once,
with its diagnosis and none of its secrets, even with no command running."""

from __future__ import annotations

import sqlite3
from concurrent.futures import ThreadPoolExecutor

import pytest
from tests.helpers import wait_until
from tests.notify.receiver import Receiver

TOKEN = "hf_notifytest_5ecret_value"

FAILING = """
name: notified
launcher: none
command: [bash, -c, 'echo "loading with $HF_TOKEN"; echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (token $HF_TOKEN)" >&2; exit 1']
env: {HF_TOKEN: "${HF_TOKEN}"}
notify:
  - url: ${NOTIFY_URL}
    on: [FAILED]
"""


@pytest.fixture
def receiver():
    found = Receiver(refuse=2)
    yield found
    found.close()


def test_a_detached_job_that_fails_is_announced_once_with_its_diagnosis(cli, write, home, receiver):
    env = {"HF_TOKEN": TOKEN, "NOTIFY_URL": receiver.url}
    job = cli("run", str(write(FAILING)), "--detach", "--json", env=env).json()
    # Nothing of ours runs but the job's supervisor: it announces the end itself.
    wait_until(lambda: receiver.accepted(), 60, "the announcement")
    assert [t["status"] for t in receiver.tries] == [503, 503, 200]
    keys = {t["headers"]["Idempotency-Key"] for t in receiver.tries}
    assert keys == {f"anylaunch-{job['id']}-0-FAILED"}  # one key for every try
    (message,) = receiver.accepted()
    assert set(message) == {"text", "blocks"}  # Slack's payload, nothing else
    text = message["text"] + message["blocks"][0]["text"]["text"]
    assert f"FAILED: job notified ({job['id']}) on local, attempt 1" in text
    diagnosis = cli("diagnose", job["id"], "--json", env=env).json()
    assert f"{diagnosis['code']} ({diagnosis['err_class']})" in text
    assert diagnosis["cause"].replace(TOKEN, "***") in text and diagnosis["suggestion"] in text
    assert "CUDA out of memory" in text
    assert TOKEN not in text and receiver.url not in text and "***" in text

    # Every later command sees it announced: nothing is sent again.
    assert cli("ps", env=env).rc == 0
    status = cli("status", job["id"], "--json", env=env).json()
    (note,) = status["notifications"]
    assert (note["status"], note["by"], note["state"], note["tries"]) == (
        "sent",
        "supervisor",
        "FAILED",
        1,
    )
    assert "notify  0: sent by supervisor  FAILED" in cli("status", job["id"], env=env).out
    assert len(receiver.tries) == 3
    db = sqlite3.connect(home / "jobs.db")
    assert db.execute("SELECT status, by, tries FROM notifications").fetchall() == [
        ("sent", "supervisor", 1)
    ]
    dump = "\n".join(db.iterdump())
    assert receiver.url not in dump and TOKEN not in dump


def test_what_the_supervisor_could_not_deliver_the_next_command_delivers_once(cli, write, home):
    down = Receiver(refuse=1000)  # down for as long as the job's supervisor tries
    try:
        env = {"HF_TOKEN": TOKEN, "NOTIFY_URL": down.url}
        job = cli("run", str(write(FAILING)), "--detach", "--json", env=env).json()
        db = sqlite3.connect(home / "jobs.db")
        wait_until(
            lambda: (
                db.execute("SELECT status, tries FROM notifications").fetchone() == ("pending", 1)
            ),
            60,
            "the supervisor giving up after its tries",
        )
        assert len(down.tries) == 4
        down.refuse = 0  # the receiver is back

        def two_commands_at_once() -> list[dict]:
            with ThreadPoolExecutor(2) as pool:
                list(pool.map(lambda _: cli("ps", env=env), range(2)))
            return down.accepted()

        wait_until(two_commands_at_once, 60, "a command's announcement", interval=0.5)
        assert len(down.accepted()) == 1
        assert cli("status", job["id"], env=env).rc == 0 and len(down.accepted()) == 1
        assert db.execute("SELECT status, by FROM notifications").fetchall() == [
            ("sent", "command")
        ]
    finally:
        down.close()


def test_an_attached_run_and_the_supervisor_announce_once_between_them(cli, write, receiver):
    # `run` waits and polls too: whichever claims first, the receiver hears once, and a
    # refusal met by `run` (which then exits) is retried by the supervisor.
    env = {"HF_TOKEN": TOKEN, "NOTIFY_URL": receiver.url}
    result = cli("run", str(write(FAILING)), "--json", env=env)
    assert result.rc == 1
    wait_until(lambda: receiver.accepted(), 60, "the announcement")
    assert [t["status"] for t in receiver.tries] == [503, 503, 200]
    status = cli("status", result.json()["id"], "--json", env=env).json()
    assert [n["status"] for n in status["notifications"]] == ["sent"]
    assert len(receiver.tries) == 3
