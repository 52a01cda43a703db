"""The SQL of jobs: recording them (before anything is submitted), their submitter,
native id, plan, cancel intent and port, and reading them back.

A job is recorded *before* it is submitted, so a crash mid-submit leaves a row to
reconcile rather than an untracked job.
"""

from __future__ import annotations

import builtins
import json
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from anylaunch.errors import JobNotFound, UsageError
from anylaunch.state import State
from anylaunch.store import attempts, notifications, rows
from anylaunch.store.connection import Tables
from anylaunch.store.ids import prefix_range
from anylaunch.store.processes import alive, this_process
from anylaunch.store.records import JobRecord


class JobTables(Tables):
    """Jobs as recorded and looked up (mixed into Store)."""

    # -- writes ---------------------------------------------------------------------------

    def add(self, record: JobRecord) -> JobRecord:
        """Record a job before it is submitted (state PENDING, no native id yet)."""
        return self.add_many([record])[0]

    def add_many(self, records: builtins.list[JobRecord]) -> builtins.list[JobRecord]:
        """Record many jobs in one transaction (the splits of a run: all or none)."""
        with self._write() as db:
            insert(db, records)
        return records

    def claim(self, job_id: str) -> bool:
        """Become the submitter of a recorded job whose native id was never recorded.

        True if this process already is, or the recorded submitter is dead (a crash
        mid-submit); False if the job has its native id or a live process submits it.
        """
        me = this_process()
        with self._write() as db:
            row = db.execute("SELECT native_id, meta FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None or row["native_id"] is not None:
                return False
            meta = json.loads(row["meta"])
            owner = meta.get("submitter")
            if owner and owner.get("pid") == me["pid"] and owner.get("started") == me["started"]:
                return True
            if alive(owner):
                return False
            meta["submitter"] = me
            db.execute("UPDATE jobs SET meta = ? WHERE id = ?", (json.dumps(meta), job_id))
            return True

    def settle(self, job_id: str) -> None:
        """A submission that ended without a native id (the backend refused it)."""
        with self._write() as db:
            db.execute(
                "UPDATE jobs SET meta = json_remove(meta, '$.submitter') WHERE id = ?", (job_id,)
            )

    def set_plan(self, job_id: str, plan: dict[str, Any]) -> None:
        """A recorded job re-planned before its (first) submission."""
        with self._write() as db:
            db.execute(
                "UPDATE jobs SET plan = ?, updated_at = ? WHERE id = ? AND native_id IS NULL",
                (json.dumps(plan), time.time(), job_id),
            )

    def set_native(self, job_id: str, native_id: str, meta: dict[str, Any] | None = None) -> None:
        """The backend's id for the job's current attempt, and the backend's metadata
        (which keeps the number of that attempt)."""
        now = time.time()
        with self._write() as db:
            row = db.execute("SELECT meta FROM jobs WHERE id = ?", (job_id,)).fetchone()
            kept = attempts.store_keys(json.loads(row["meta"]) if row else {})
            db.execute(
                "UPDATE jobs SET native_id = ?, meta = ?, updated_at = ? WHERE id = ?",
                (native_id, json.dumps({**(meta or {}), **kept}), now, job_id),
            )
            attempts.set_native(db, job_id, native_id, now)

    def set_snapshot(self, job_ids: Sequence[str], snapshot: dict[str, Any]) -> None:
        """The snapshot these jobs run from (its hash, files, bytes), with their source."""
        base = {"repo": None, "commit": None, "branch": None, "dirty": None}
        with self._write() as db:
            db.executemany(
                "UPDATE jobs SET source = json_set(COALESCE(source, ?), '$.snapshot', json(?))"
                " WHERE id = ?",
                [(json.dumps(base), json.dumps(snapshot), job_id) for job_id in job_ids],
            )

    def reserve_port(self, port: int, job_id: str) -> bool:
        """Claim a port for a live job; False if another live job holds it."""
        now = time.time()
        with self._write() as db:
            # A reservation whose job never got recorded (its plan failed) expires.
            db.execute(
                "DELETE FROM ports WHERE port = ? AND at < ?"
                " AND job_id NOT IN (SELECT id FROM jobs)",
                (port, now - 600),
            )
            cursor = db.execute(
                "INSERT OR IGNORE INTO ports (port, job_id, at) VALUES (?, ?, ?)",
                (port, job_id, now),
            )
            return cursor.rowcount == 1

    def request_cancel(self, job_id: str) -> None:
        """Durable intent first: a poll that races the kill must end CANCELLED, not FAILED."""
        with self._write() as db:
            db.execute(
                "UPDATE jobs SET cancel_requested_at = COALESCE(cancel_requested_at, ?) WHERE id = ?",
                (time.time(), job_id),
            )

    # -- reads ----------------------------------------------------------------------------

    def get(self, job_id: str) -> JobRecord:
        """A job by id or unique id prefix."""
        found = self._db.execute(
            "SELECT * FROM jobs WHERE id = ? UNION ALL"
            " SELECT * FROM jobs WHERE id >= ? AND id < ? AND id != ? LIMIT 3",
            (job_id, *prefix_range(job_id), job_id),
        ).fetchall()
        if not found or not job_id:
            raise JobNotFound(f"no job '{job_id}' in {self.path} — list jobs with 'anylaunch ps'")
        if found[0]["id"] != job_id and len(found) > 1:
            ids = ", ".join(r["id"] for r in found)
            raise UsageError(f"job id '{job_id}' is ambiguous ({ids}) — give more characters")
        return rows.job(found[0], full=True)

    def list(
        self,
        *,
        limit: int | None = 50,
        states: Sequence[State] = (),
        backend: str | None = None,
        run_id: str | None = None,
    ) -> builtins.list[JobRecord]:
        """Newest first, without the spec and plan blobs (fast on 100,000 jobs)."""
        where, args = [], []
        if states:
            where.append(f"state IN ({','.join('?' * len(states))})")
            args += [s.value for s in states]
        if backend:
            where.append("backend = ?")
            args.append(backend)
        if run_id:
            where.append("run_id = ?")
            args.append(run_id)
        sql = f"SELECT {rows.SUMMARY_COLUMNS} FROM jobs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [rows.job(row, full=False) for row in self._db.execute(sql, args)]

    def load_blobs(self, records: Sequence[JobRecord]) -> None:
        """Give records read by `list` (summary columns) their spec and plan, one query
        per 500 of them; records that have a plan already are left as they are."""
        wanted = {r.id: r for r in records if not r.plan}
        ids = list(wanted)
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            found = self._db.execute(
                f"SELECT id, spec, plan FROM jobs WHERE id IN ({','.join('?' * len(chunk))})",
                chunk,
            )
            for row in found:
                wanted[row["id"]].spec = json.loads(row["spec"])
                wanted[row["id"]].plan = json.loads(row["plan"])

    def events(self, job_id: str) -> builtins.list[dict[str, Any]]:
        """A job's history, oldest first; each event's id is the job's and its place in it."""
        found = self._db.execute(
            "SELECT at, state, detail FROM events WHERE job_id = ? ORDER BY at, rowid", (job_id,)
        )
        return [
            {"id": f"{job_id}/{n}", "kind": "event", **dict(row)} for n, row in enumerate(found)
        ]

    def count(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]


def insert(db: sqlite3.Connection, records: list[JobRecord]) -> None:
    """Write new jobs, each with its first event, inside the caller's transaction."""
    now = time.time()
    me = this_process()
    values, events = [], []
    for record in records:
        record.created_at = record.updated_at = now
        if record.native_id is None:
            # Who submits it: a row left without a native id by a dead submitter is
            # reconciled with the backend rather than left PENDING forever.
            record.meta = {**record.meta, "submitter": record.meta.get("submitter", me)}
        values.append(
            (
                record.id,
                record.name,
                record.backend,
                record.native_id,
                record.state.value,
                record.exit_code,
                record.detail,
                record.run_id,
                record.split_id,
                record.job_dir,
                json.dumps(record.spec),
                json.dumps(record.plan),
                json.dumps(record.meta),
                json.dumps(record.source) if record.source is not None else None,
                now,
                now,
            )
        )
        events.append((record.id, now, record.state.value, "recorded"))
    db.executemany(
        "INSERT INTO jobs (id, name, backend, native_id, state, exit_code, detail, run_id,"
        " split_id, job_dir, spec, plan, meta, source, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        values,
    )
    db.executemany("INSERT INTO events (job_id, at, state, detail) VALUES (?, ?, ?, ?)", events)
    for record in records:
        if record.spec.get("notify"):
            notifications.insert(db, record.id, len(record.spec["notify"]))
    attempts.insert_first(db, records)
