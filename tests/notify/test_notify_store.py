"""The store's side of `notify:`: one sender per announcement, whatever the race."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time

from tests.notify.receiver import Receiver

from anylaunch.observe import notify
from anylaunch.state import State
from anylaunch.store import JobRecord, Store
from anylaunch.store.notifications import MAX_TRIES


def _record(job_id: str, targets: int) -> JobRecord:
    notify = [{"command": "true", "on": ["FAILED"]}] * targets
    return JobRecord(
        job_id, job_id, "local", State.PENDING, f"/tmp/{job_id}", spec={"notify": notify}
    )


def _claim(start: float, results, done) -> None:
    store = Store()
    while time.time() < start:
        time.sleep(0.001)
    claim = store.claim_notification("j1", 0)
    results.put(os.getpid() if claim else None)
    done.wait(60)  # alive while the others try: a dead claimer's claim is taken again


def test_of_processes_claiming_one_announcement_at_once_one_wins(home, spawns):
    Store().add(_record("j1", 1))
    ctx = multiprocessing.get_context("spawn")
    results, done = ctx.Queue(), ctx.Event()
    start = time.time() + 5  # every process opened its store and waits for the same moment
    procs = [ctx.Process(target=_claim, args=(start, results, done)) for _ in range(6)]
    for p in procs:
        p.start()
    won = [results.get(timeout=60) for _ in procs]
    done.set()
    for p in procs:
        p.join(30)
    assert len([w for w in won if w]) == 1
    # The winner ended without recording a send: it may have sent, so the next claim
    # sends again (at least once, with the same key).
    assert Store().claim_notification("j1", 0) is not None


def test_a_live_claim_blocks_others_and_a_refusal_waits_out_a_doubling_backoff(home):
    store = Store()
    store.add(_record("j1", 2))
    assert store.pending_notifications(["j1", "other"]) == ["j1"]
    claim = store.claim_notification("j1", 0)
    assert claim is not None and claim.tries == 1
    assert store.claim_notification("j1", 0) is None  # this process holds it, alive
    store.notification_failed(claim, "FAILED", "webhook answered HTTP 503")
    assert store.claim_notification("j1", 0) is None  # waiting out its backoff
    row = store.notifications("j1")[0]
    assert (row["status"], row["tries"], row["error"]) == (
        "pending",
        1,
        "webhook answered HTTP 503",
    )
    store._db.execute("UPDATE notifications SET next_at = 0")
    store._db.commit()
    claim = store.claim_notification("j1", 0)
    assert claim is not None and claim.tries == 2
    store.notification_sent(claim, "FAILED", by="command")
    skipped = store.claim_notification("j1", 1)
    assert skipped is not None
    store.notification_skipped(skipped, "SUCCEEDED")
    assert store.pending_notifications(["j1"]) == []
    assert [r["status"] for r in store.notifications("j1")] == ["sent", "skipped"]


def test_an_announcement_is_given_up_after_its_last_try(home):
    store = Store()
    store.add(_record("j1", 1))
    for _ in range(MAX_TRIES):
        store._db.execute("UPDATE notifications SET next_at = 0")
        store._db.commit()
        claim = store.claim_notification("j1", 0)
        assert claim is not None
        store.notification_failed(claim, "FAILED", "webhook unreachable: ConnectionRefusedError")
    assert store.notifications("j1")[0]["status"] == "failed"
    assert store.pending_notifications(["j1"]) == []


def test_a_supervisor_that_finds_a_command_sending_delivers_what_the_command_could_not(
    home, tmp_path, monkeypatch
):
    # An attached `run` polls the job's end and tries once; its supervisor, patient, tries
    # again and again. If the supervisor looks while the command's single try is under
    # way and goes away, the command's refusal leaves the announcement to a command that
    # may never come: nothing runs once `run` exits.
    receiver = Receiver(refuse=1)
    monkeypatch.setenv("NOTIFY_URL", receiver.url)
    store = Store()
    spec = {"notify": [{"url": "${NOTIFY_URL}", "on": ["FAILED"]}]}
    store.add(JobRecord("j1", "j1", "local", State.PENDING, str(tmp_path), spec=spec))
    store.transition("j1", State.FAILED, exit_code=1)

    looked, command_done = threading.Event(), threading.Event()

    def supervisor_announces() -> None:
        own = Store()  # a connection of its own thread
        claim = own.claim_notification

        def claim_and_say(*args, **kwargs):
            found = claim(*args, **kwargs)
            if not looked.is_set():
                looked.set()
                # The worst moment: the command's try ends before this sender looks again.
                command_done.wait(30)
            return found

        vars(own)["claim_notification"] = claim_and_say
        notify.announce(
            own, [own.get("j1")], lambda _: None, tries=notify.SUPERVISOR_TRIES, by="supervisor"
        )

    supervisor = threading.Thread(target=supervisor_announces)

    def diagnose_while_the_supervisor_looks(_record):
        # The command holds its claim while it makes the message (a failed job's
        # diagnosis): the supervisor looks at the announcement meanwhile.
        supervisor.start()
        assert looked.wait(30)

    try:
        notify.announce(store, [store.get("j1")], diagnose_while_the_supervisor_looks)
        command_done.set()
        supervisor.join(60)
        assert not supervisor.is_alive()
        assert [t["status"] for t in receiver.tries] == [503, 200]
    finally:
        receiver.close()
    (row,) = store.notifications("j1")
    assert (row["status"], row["by"], row["tries"]) == ("sent", "supervisor", 2)
