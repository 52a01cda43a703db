"""The store's side of `notify:`: one sender per announcement, whatever the race."""

from __future__ import annotations

import multiprocessing
import os
import time

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
