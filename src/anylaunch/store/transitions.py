"""The SQL of a job's state: the forward-only rule, the one way into UNKNOWN, and the
writing of one poll's observations in one transaction."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence

from anylaunch.state import State, may_become_unknown, may_move
from anylaunch.store import attempts, rows
from anylaunch.store.connection import Tables
from anylaunch.store.records import JobRecord, Update


class TransitionTables(Tables):
    """State changes of jobs (mixed into Store)."""

    def transition(
        self,
        job_id: str,
        state: State,
        *,
        exit_code: int | None = None,
        detail: str | None = None,
    ) -> bool:
        """Move a job to `state` if the forward-only rule allows it; True if it moved."""
        return job_id in self.transition_many([(job_id, state, exit_code, detail)])

    def transition_many(
        self, changes: Sequence[tuple[str, State, int | None, str | None]]
    ) -> set[str]:
        """Move many jobs in one transaction; return the ids that moved."""
        moved: set[str] = set()
        if not changes:
            return moved
        with self._write() as db:
            now = time.time()
            for job_id, state, exit_code, detail in changes:
                row = db.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()
                if row is not None and _move(
                    db, job_id, State(row["state"]), state, exit_code, detail, now
                ):
                    moved.add(job_id)
        return moved

    def mark_unknown(self, job_id: str, detail: str, *, final: bool = False) -> bool:
        """A live job whose fate nobody can tell: a submit whose answer was lost (`final`
        False: polls keep looking for it), or a job whose result was lost with the
        process that watched it (`final`: nothing will ever tell more; its port is free).

        The one way into UNKNOWN: a poll that merely could not tell never writes it.
        True if the row changed.
        """
        with self._write() as db:
            row = db.execute("SELECT state, meta FROM jobs WHERE id = ?", (job_id,)).fetchone()
            return row is not None and _unknown(db, job_id, row, detail, final, time.time())

    def apply(self, updates: Sequence[Update]) -> dict[str, JobRecord]:
        """Write what one poll observed, every job in ONE transaction: a crash or an error
        half-way leaves the store as it was before the poll, never half of a poll.

        Per job, in this order: a new native id or metadata (compare-and-swap on the
        native id), then its state by the forward-only rule. A kill that was asked for
        (`request_cancel`, read here, inside the transaction, so a cancel racing the poll
        counts) ends CANCELLED where the backend says FAILED or cannot tell. A state
        that may not be recorded still updates a live job's detail, without an event.
        Returns every job named, as stored after the write (summary columns).
        """
        if not updates:
            return {}
        out: dict[str, JobRecord] = {}
        summary = f"SELECT {rows.SUMMARY_COLUMNS} FROM jobs WHERE id = ?"
        with self._write() as db:
            now = time.time()
            for update in updates:
                row = db.execute(summary, (update.job_id,)).fetchone()
                if row is None:
                    continue
                _apply_one(db, row, update, now)
                out[update.job_id] = rows.job(
                    db.execute(summary, (update.job_id,)).fetchone(), full=False
                )
        return out

    def note(self, job_id: str, detail: str) -> None:
        """Update a live job's detail (why it is pending) without an event per poll."""
        with self._write() as db:
            db.execute(
                "UPDATE jobs SET detail = ?, updated_at = ? WHERE id = ? AND detail IS NOT ?"
                f" AND state NOT IN {rows.TERMINAL_SQL}",
                (detail, time.time(), job_id, detail),
            )


def _move(
    db: sqlite3.Connection,
    job_id: str,
    current: State,
    state: State,
    exit_code: int | None,
    detail: str | None,
    now: float,
) -> bool:
    """Move one job to `state` if the forward-only rule allows it; True if it moved."""
    if not may_move(current, state):
        return False
    # A new state's detail replaces the old one, an empty one too: a detail kept from
    # before ("not submitted", "pending: Resources") would describe a state the job left.
    db.execute(
        "UPDATE jobs SET state = ?, exit_code = COALESCE(?, exit_code),"
        " detail = ?, updated_at = ? WHERE id = ?",
        (state.value, exit_code, detail, now, job_id),
    )
    db.execute(
        "INSERT INTO events (job_id, at, state, detail) VALUES (?, ?, ?, ?)",
        (job_id, now, state.value, detail),
    )
    if state.terminal:
        db.execute("DELETE FROM ports WHERE job_id = ?", (job_id,))
        attempts.close_open(db, job_id, now, state, exit_code)
    return True


def _unknown(
    db: sqlite3.Connection, job_id: str, row: sqlite3.Row, detail: str, final: bool, now: float
) -> bool:
    """`mark_unknown` inside a transaction; `row` has the job's state and meta."""
    if not may_become_unknown(State(row["state"])):
        return False
    meta = json.loads(row["meta"])
    if row["state"] == State.UNKNOWN.value and (meta.get("outcome_unknown") or not final):
        return False  # already said: one event, not one per poll
    if final:
        meta["outcome_unknown"] = True
    db.execute(
        "UPDATE jobs SET state = ?, detail = ?, meta = ?, updated_at = ? WHERE id = ?",
        (State.UNKNOWN.value, detail, json.dumps(meta), now, job_id),
    )
    db.execute(
        "INSERT INTO events (job_id, at, state, detail) VALUES (?, ?, ?, ?)",
        (job_id, now, State.UNKNOWN.value, detail),
    )
    if final:
        db.execute("DELETE FROM ports WHERE job_id = ?", (job_id,))
        attempts.close_open(db, job_id, now, State.UNKNOWN)
    return True


def _apply_one(db: sqlite3.Connection, row: sqlite3.Row, update: Update, now: float) -> None:
    """One job of `apply`, inside its transaction."""
    job_id, current = update.job_id, State(row["state"])
    if update.native_id is not None or update.meta is not None:
        _reidentify(db, row, update, now)
    if update.attempts and _merge_attempts(db, row, update, now):
        current = State(db.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()[0])
        if update.state is not None and not update.state.terminal and update.state is not current:
            # A new attempt runs: its progress starts again from PENDING, which the
            # forward-only rule would refuse within one attempt.
            _restart(db, job_id, update.state, update.detail, now)
            return
    state = update.state
    if state is None:
        _note(db, row, update.detail, now)
        return
    if row["cancel_requested_at"] and row["native_id"] and state in (State.FAILED, State.UNKNOWN):
        # A kill we asked for is not a failure. Without a native id the backend cannot
        # know the job yet: its submitter stops it once it has one (`submission.send`).
        state = State.CANCELLED
    elif state is State.UNKNOWN and update.final:
        _unknown(db, job_id, row, update.detail or "outcome unknown", True, now)
        return
    if not _move(db, job_id, current, state, update.exit_code, update.detail, now):
        _note(db, row, update.detail, now)


def _note(db: sqlite3.Connection, row: sqlite3.Row, detail: str | None, now: float) -> None:
    """A live job's new detail (why it is pending), without an event."""
    if detail and detail != row["detail"] and not State(row["state"]).terminal:
        db.execute(
            "UPDATE jobs SET detail = ?, updated_at = ? WHERE id = ?", (detail, now, row["id"])
        )


def _reidentify(db: sqlite3.Connection, row: sqlite3.Row, update: Update, now: float) -> None:
    """A new native id or metadata, compare-and-swap on the stored native id."""
    if update.expected_native_id is not None and row["native_id"] != update.expected_native_id:
        return  # another process recorded it first
    if update.attempt and (State(row["state"]).terminal or row["cancel_requested_at"]):
        return  # a late poll must not start a job that ended or that the user stopped
    native_id = update.native_id if update.native_id is not None else row["native_id"]
    stored_meta = json.loads(row["meta"])
    new_meta = dict(update.meta) if update.meta is not None else dict(stored_meta)
    # The attempt's number and the controller are the store's to keep: a backend's
    # metadata names its own.
    new_meta.update(attempts.store_keys(stored_meta))
    meta = json.dumps(new_meta)
    if native_id == row["native_id"] and meta == row["meta"]:
        return  # already recorded: the same observation twice writes nothing twice
    if update.attempt:
        new_meta["attempt"] = attempts.open_next(
            db, update.job_id, native_id, now, update.ended_as, new_meta["attempt"]
        )
        meta = json.dumps(new_meta)
    elif native_id != row["native_id"]:
        attempts.set_native(db, update.job_id, native_id, now)
    db.execute(
        "UPDATE jobs SET native_id = ?, meta = ?, updated_at = ? WHERE id = ?",
        (native_id, meta, now, update.job_id),
    )
    db.executemany(
        "INSERT INTO events (job_id, at, state, detail) VALUES (?, ?, ?, ?)",
        [(update.job_id, now, row["state"], event) for event in update.events],
    )


def _merge_attempts(db: sqlite3.Connection, row: sqlite3.Row, update: Update, now: float) -> bool:
    """The attempts a job recorded of itself; True when one newer than the job's current
    attempt began (its number becomes the job's)."""
    meta = json.loads(row["meta"])
    current = attempts.current_number(meta)
    newest = attempts.merge_seen(db, update.job_id, row["native_id"], update.attempts)
    if newest <= current or State(row["state"]).terminal:
        return False
    meta["attempt"] = newest
    db.execute(
        "UPDATE jobs SET meta = ?, updated_at = ? WHERE id = ?",
        (json.dumps(meta), now, update.job_id),
    )
    return True


def _restart(
    db: sqlite3.Connection, job_id: str, state: State, detail: str | None, now: float
) -> None:
    """A live job whose new attempt is in `state`, whatever state the last one reached."""
    db.execute(
        "UPDATE jobs SET state = ?, exit_code = NULL, detail = ?, updated_at = ? WHERE id = ?",
        (state.value, detail, now, job_id),
    )
    db.execute(
        "INSERT INTO events (job_id, at, state, detail) VALUES (?, ?, ?, ?)",
        (job_id, now, state.value, detail),
    )
