"""The SQL of a job's announcements (`notify:`): one row per job and target, claimed
before it is sent, so that of every process that sees the same end only one sends."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass

from anylaunch.store.connection import Tables
from anylaunch.store.processes import alive, this_process

# Tries before a target is given up on (the row says why); the wait between them doubles.
MAX_TRIES = 8
FIRST_WAIT_S = 2.0


@dataclass(frozen=True)
class Claim:
    """A target this process may send now: the row is `sending`, under its name."""

    job_id: str
    target: int
    tries: int  # this one included
    wait_s: float = 0.0  # a patient claim: the backoff left before it may send


class NotificationTables(Tables):
    """Announcements of a job's end (mixed into Store)."""

    def pending_notifications(self, job_ids: Sequence[str]) -> list[str]:
        """Of `job_ids`, the jobs with an announcement not yet made or given up on."""
        if not job_ids:
            return []
        marks = ",".join("?" * len(job_ids))
        rows = self._db.execute(
            "SELECT DISTINCT job_id FROM notifications"
            f" WHERE status IN ('pending', 'sending') AND job_id IN ({marks})",
            list(job_ids),
        ).fetchall()
        return [row["job_id"] for row in rows]

    def claim_notification(
        self, job_id: str, target: int, *, patient: bool = False
    ) -> Claim | None:
        """Take the target's announcement for this process, or None: made already, given
        up, being made by a live process, or waiting out its backoff — unless `patient`:
        a process that may wait (a local job's supervisor) takes it anyway and waits out
        the backoff itself (`Claim.wait_s`), so a command that tried once and went away
        does not leave the announcement to the next command.

        The claim is written before anything is sent (like a resubmission's), so two
        commands that poll one ended job at once cannot both send. A row left `sending`
        by a process that died may or may not have reached the receiver: it is sent
        again, with the same key (at least once).
        """
        with self._write() as db:
            row = db.execute(
                "SELECT status, tries, next_at, sender FROM notifications"
                " WHERE job_id = ? AND target = ?",
                (job_id, target),
            ).fetchone()
            if row is None or row["status"] not in ("pending", "sending"):
                return None
            if row["status"] == "sending" and alive(json.loads(row["sender"] or "null")):
                return None
            wait_s = max(0.0, row["next_at"] - time.time())
            if wait_s and not patient:
                return None
            tries = row["tries"] + 1
            db.execute(
                "UPDATE notifications SET status = 'sending', tries = ?, sender = ?"
                " WHERE job_id = ? AND target = ?",
                (tries, json.dumps(this_process()), job_id, target),
            )
        return Claim(job_id, target, tries, wait_s)

    def notification_open(self, job_id: str, target: int) -> bool:
        """Whether the target's announcement is still to be made: pending, or being sent.
        Made, skipped and given up are for good."""
        row = self._db.execute(
            "SELECT status FROM notifications WHERE job_id = ? AND target = ?",
            (job_id, target),
        ).fetchone()
        return row is not None and row["status"] in ("pending", "sending")

    def notification_sent(self, claim: Claim, state: str, by: str) -> None:
        """The receiver took it (or the job itself says it delivered it: a receipt)."""
        self._finish(claim, "sent", state=state, by=by, error=None, next_at=0.0)

    def notification_skipped(self, claim: Claim, state: str) -> None:
        """The job ended in a state the target does not ask about."""
        self._finish(claim, "skipped", state=state, by=None, error=None, next_at=0.0)

    def notification_failed(self, claim: Claim, state: str, error: str) -> None:
        """The receiver refused or did not answer: tried again after a wait that doubles,
        given up after MAX_TRIES (the row keeps the last error)."""
        status = "failed" if claim.tries >= MAX_TRIES else "pending"
        wait = FIRST_WAIT_S * 2 ** (claim.tries - 1)
        self._finish(claim, status, state=state, by=None, error=error, next_at=time.time() + wait)

    def notifications(self, job_id: str) -> list[dict[str, object]]:
        """The job's announcements as stored, for `status` and tests."""
        rows = self._db.execute(
            "SELECT target, status, state, tries, error, sent_at, by FROM notifications"
            " WHERE job_id = ? ORDER BY target",
            (job_id,),
        ).fetchall()
        return [dict(row) for row in rows]

    def _finish(
        self,
        claim: Claim,
        status: str,
        *,
        state: str,
        by: str | None,
        error: str | None,
        next_at: float,
    ) -> None:
        now = time.time()
        with self._write() as db:
            db.execute(
                "UPDATE notifications SET status = ?, state = ?, by = ?, error = ?,"
                " next_at = ?, sent_at = ?, sender = NULL"
                " WHERE job_id = ? AND target = ? AND status = 'sending'",
                (
                    status,
                    state,
                    by,
                    error,
                    next_at,
                    now if status == "sent" else None,
                    claim.job_id,
                    claim.target,
                ),
            )


def insert(db: sqlite3.Connection, job_id: str, targets: int) -> None:
    """A new job's announcements, inside the transaction that records the job."""
    db.executemany(
        "INSERT INTO notifications (job_id, target, status) VALUES (?, ?, 'pending')",
        [(job_id, i) for i in range(targets)],
    )
