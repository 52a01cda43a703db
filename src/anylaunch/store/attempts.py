"""The SQL of attempts: each run of a job on its backend, how it ended and why the next
one was made.

A job has one attempt when recorded; a new one begins when its backend runs it again (a
Lepton resubmission after an eviction, a SkyPilot recovery, a Slurm requeue) or when its
retry policy makes one. The open attempt (no `ended_at` yet) is the one running now; a
job's terminal state ends it. Jobs recorded before attempts were stored have no rows:
their one attempt is read from the job row (`attempts` below).
"""

from __future__ import annotations

import builtins
import json
import sqlite3
import time
from collections.abc import Mapping, Sequence
from typing import Any

from anylaunch.state import State
from anylaunch.store.connection import Tables
from anylaunch.store.processes import this_process
from anylaunch.store.records import Attempt, JobRecord
from anylaunch.store.rows import TERMINAL_SQL

# At most this many hosts are kept per attempt (a node list, the nodes avoided): a job's
# own record of itself is untrusted input, and a row must stay small.
MAX_HOSTS = 256


class AttemptTables(Tables):
    """Attempts of jobs (mixed into Store)."""

    def attempts(self, job: JobRecord) -> builtins.list[Attempt]:
        """Every attempt of `job`, oldest first; a job recorded before attempts were kept
        reads as the one attempt it was."""
        found = self._db.execute(
            "SELECT * FROM attempts WHERE job_id = ? ORDER BY number", (job.id,)
        ).fetchall()
        if found:
            return [_attempt(row) for row in found]
        ended = job.updated_at if job.state.terminal else None
        return [
            Attempt(
                job.id,
                current_number(job.meta),
                job.native_id,
                started_at=job.created_at,
                ended_at=ended,
                state=job.state if job.state.terminal else None,
                exit_code=job.exit_code,
            )
        ]

    def attempt_ended(
        self, job_id: str, number: int, state: State, exit_code: int | None, detail: str
    ) -> bool:
        """A poll saw attempt `number` of a live job end, and the job's end is not yet
        decided (its controller decides): the attempt ends, the job only says so in its
        detail. True the first time."""
        now = time.time()
        with self._write() as db:
            cursor = db.execute(
                "UPDATE attempts SET ended_at = ?, state = ?, exit_code = ?"
                " WHERE job_id = ? AND number = ? AND ended_at IS NULL",
                (now, state.value, exit_code, job_id, number),
            )
            if cursor.rowcount != 1:
                return False
            db.execute(
                "UPDATE jobs SET detail = ?, updated_at = ? WHERE id = ?"
                f" AND state NOT IN {TERMINAL_SQL}",
                (detail, now, job_id),
            )
            return True

    def end_attempt(
        self,
        job_id: str,
        number: int,
        *,
        diagnosis: Mapping[str, Any] | None,
        next_reason: str | None,
        avoided: Sequence[str] = (),
        state: State | None = None,
        exit_code: int | None = None,
    ) -> bool:
        """Record how attempt `number` ended and why the next one is made (`next_reason`,
        None when none is). True if the attempt was still open or lacked its diagnosis."""
        with self._write() as db:
            cursor = db.execute(
                "UPDATE attempts SET ended_at = COALESCE(ended_at, ?),"
                " state = COALESCE(?, state), exit_code = COALESCE(?, exit_code),"
                " diagnosis = ?, next = ?, avoided = CASE WHEN ? = '[]' THEN avoided ELSE ? END"
                " WHERE job_id = ? AND number = ? AND (ended_at IS NULL OR diagnosis IS NULL)",
                (
                    time.time(),
                    state.value if state else None,
                    exit_code,
                    json.dumps(dict(diagnosis)) if diagnosis is not None else None,
                    next_reason,
                    hosts_json(avoided),
                    hosts_json(avoided),
                    job_id,
                    number,
                ),
            )
            return cursor.rowcount == 1

    def begin_attempt(
        self,
        job_id: str,
        number: int,
        plan: dict[str, Any],
        *,
        avoided: Sequence[str],
        detail: str,
    ) -> bool:
        """Open attempt `number` of a live job, to be sent by this process: the job goes
        back to PENDING with no native id (its submitter is this process) and the new
        attempt's plan. Refused (False) when the job ended, was asked to cancel, or the
        attempt exists already: of two controllers racing, one sends it."""
        now = time.time()
        with self._write() as db:
            row = db.execute(
                "SELECT state, meta, cancel_requested_at FROM jobs WHERE id = ?", (job_id,)
            ).fetchone()
            if row is None or State(row["state"]).terminal or row["cancel_requested_at"]:
                return False
            taken = db.execute(
                "SELECT 1 FROM attempts WHERE job_id = ? AND number >= ?", (job_id, number)
            ).fetchone()
            if taken is not None:
                return False
            meta = {**json.loads(row["meta"]), "attempt": number, "submitter": this_process()}
            close_open(db, job_id, now, None)
            db.execute(
                "INSERT INTO attempts (job_id, number, avoided) VALUES (?, ?, ?)",
                (job_id, number, hosts_json(avoided)),
            )
            db.execute(
                "UPDATE jobs SET state = ?, native_id = NULL, exit_code = NULL, detail = ?,"
                " plan = ?, meta = ?, updated_at = ? WHERE id = ?",
                (State.PENDING.value, detail, json.dumps(plan), json.dumps(meta), now, job_id),
            )
            db.execute(
                "INSERT INTO events (job_id, at, state, detail) VALUES (?, ?, ?, ?)",
                (job_id, now, State.PENDING.value, detail),
            )
        return True

    def claim_keeper(self, job_id: str, process: dict[str, Any]) -> bool:
        """Become the one process that makes a job's next attempts (its controller): True
        if none is recorded, the recorded one is dead, or it is `process` already."""
        from anylaunch.store.processes import alive

        with self._write() as db:
            row = db.execute("SELECT meta FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None:
                return False
            meta = json.loads(row["meta"])
            owner = meta.get("keeper")
            if owner and owner.get("pid") != process["pid"] and alive(owner):
                return False
            meta["keeper"] = process
            db.execute("UPDATE jobs SET meta = ? WHERE id = ?", (json.dumps(meta), job_id))
        return True


def store_keys(meta: Mapping[str, Any]) -> dict[str, Any]:
    """What the store keeps in a job's metadata when a backend's replaces it: the
    number of the current attempt, and the controller that makes the next."""
    kept: dict[str, Any] = {"attempt": current_number(meta)}
    if meta.get("keeper"):
        kept["keeper"] = meta["keeper"]
    return kept


def current_number(meta: Mapping[str, Any]) -> int:
    """The number of a job's current attempt, from its metadata (1 when not recorded)."""
    number = meta.get("attempt", 1)
    return number if isinstance(number, int) and not isinstance(number, bool) else 1


def hosts_json(hosts: Sequence[str]) -> str:
    return json.dumps([str(h)[:255] for h in list(hosts)[:MAX_HOSTS]])


def insert_first(db: sqlite3.Connection, records: Sequence[JobRecord]) -> None:
    """The first attempt of newly recorded jobs, inside the caller's transaction."""
    db.executemany(
        "INSERT INTO attempts (job_id, number) VALUES (?, ?)",
        [(r.id, current_number(r.meta)) for r in records],
    )


def set_native(db: sqlite3.Connection, job_id: str, native_id: str | None, now: float) -> None:
    """The open attempt's native id, once the backend named it (it started being sent
    then)."""
    db.execute(
        "UPDATE attempts SET native_id = ?, started_at = COALESCE(started_at, ?)"
        " WHERE job_id = ? AND ended_at IS NULL",
        (native_id, now, job_id),
    )


def close_open(
    db: sqlite3.Connection,
    job_id: str,
    now: float,
    state: State | None,
    exit_code: int | None = None,
) -> None:
    """End the job's open attempt (its state, when known), inside the caller's transaction."""
    db.execute(
        "UPDATE attempts SET ended_at = ?, state = COALESCE(?, state),"
        " exit_code = COALESCE(?, exit_code) WHERE job_id = ? AND ended_at IS NULL",
        (now, state.value if state else None, exit_code, job_id),
    )


def open_next(
    db: sqlite3.Connection,
    job_id: str,
    native_id: str | None,
    now: float,
    ended_as: State | None,
    current: int,
) -> int:
    """The backend runs the job again (an eviction's resubmission, a recovery): end the
    open attempt, open the next after `current` (the job's attempt now); its number."""
    close_open(db, job_id, now, ended_as)
    row = db.execute("SELECT MAX(number) FROM attempts WHERE job_id = ?", (job_id,)).fetchone()
    number = max(int(row[0] or 0), current) + 1
    db.execute(
        "INSERT INTO attempts (job_id, number, native_id, started_at) VALUES (?, ?, ?, ?)",
        (job_id, number, native_id, now),
    )
    return number


def merge_seen(
    db: sqlite3.Connection, job_id: str, native_id: str | None, seen: Sequence[Mapping[str, Any]]
) -> int:
    """Attempts the job itself recorded (`Observation.attempts`: a Slurm job continuing
    itself), written over what is stored where they say more; the newest number seen."""
    newest = 0
    for one in seen:
        number = one["attempt"]
        newest = max(newest, number)
        db.execute(
            "INSERT OR IGNORE INTO attempts (job_id, number, native_id) VALUES (?, ?, ?)",
            (job_id, number, native_id),
        )
        state = one.get("state")
        diagnosis = one.get("diagnosis")
        db.execute(
            "UPDATE attempts SET started_at = COALESCE(?, started_at),"
            " ended_at = COALESCE(?, ended_at), state = COALESCE(?, state),"
            " exit_code = COALESCE(?, exit_code),"
            " nodes = CASE WHEN ? = '[]' THEN nodes ELSE ? END,"
            " avoided = CASE WHEN ? = '[]' THEN avoided ELSE ? END,"
            " diagnosis = COALESCE(?, diagnosis), next = COALESCE(?, next)"
            " WHERE job_id = ? AND number = ?",
            (
                one.get("started_at"),
                one.get("ended_at"),
                state.value if isinstance(state, State) else None,
                one.get("exit_code"),
                hosts_json(one.get("nodes") or []),
                hosts_json(one.get("nodes") or []),
                hosts_json(one.get("avoided") or []),
                hosts_json(one.get("avoided") or []),
                json.dumps(diagnosis) if diagnosis else None,
                one.get("next"),
                job_id,
                number,
            ),
        )
    # An earlier attempt that the job left without an end (killed at once: a requeue by
    # the program or by Slurm) ended when the next one started.
    db.execute(
        "UPDATE attempts SET ended_at = (SELECT MIN(later.started_at) FROM attempts later"
        " WHERE later.job_id = attempts.job_id AND later.number > attempts.number"
        " AND later.started_at IS NOT NULL)"
        " WHERE job_id = ? AND ended_at IS NULL AND number < ?",
        (job_id, newest),
    )
    return newest


def _attempt(row: sqlite3.Row) -> Attempt:
    return Attempt(
        job_id=row["job_id"],
        number=row["number"],
        native_id=row["native_id"],
        started_at=row["started_at"],
        ended_at=row["ended_at"],
        state=State(row["state"]) if row["state"] else None,
        exit_code=row["exit_code"],
        nodes=json.loads(row["nodes"]),
        avoided=json.loads(row["avoided"]),
        diagnosis=json.loads(row["diagnosis"]) if row["diagnosis"] else None,
        next=row["next"],
    )
