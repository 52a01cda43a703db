"""The SQL of runs: a group of jobs launched together (the splits of a parallel step),
recorded with all its splits at once, and read back split by split."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence

from anylaunch.errors import JobNotFound, UsageError
from anylaunch.store import rows
from anylaunch.store.connection import Tables
from anylaunch.store.ids import prefix_range
from anylaunch.store.jobs import insert
from anylaunch.store.records import JobRecord


class RunTables(Tables):
    """Runs and their splits (mixed into Store)."""

    def add_run(self, run_id: str, key: str | None, records: list[JobRecord]) -> str:
        """Record a run and all its splits in one transaction, before anything is submitted.

        With a `key` (the same command run again), an unfinished run of that key wins:
        nothing is written and its id is returned, so two `anylaunch run` of the same
        file never both submit it.
        """
        with self._write() as db:
            if key is not None:
                found = _open_run(db, key)
                if found is not None:
                    return found
            db.execute(
                "INSERT INTO runs (id, key, created_at) VALUES (?, ?, ?)",
                (run_id, key, time.time()),
            )
            insert(db, records)
        return run_id

    def open_run(self, key: str) -> str | None:
        """The newest run of `key` with a split that is live, or whose submission was
        never settled (a crash between recording and submitting), if any."""
        return _open_run(self._db, key)

    def count_attempts(self, run_id: str, split_id: int | None) -> int:
        """Attempts already made for this split of this run: one per job recorded for it,
        or more where a job made several of its own (its retry policy, a requeue)."""
        row = self._db.execute(
            "SELECT COUNT(*), MAX(CAST(json_extract(meta, '$.attempt') AS INTEGER)) FROM jobs"
            " WHERE run_id = ? AND split_id IS ?",
            (run_id, split_id),
        ).fetchone()
        return max(row[0], row[1] or 0)

    def resolve_run(self, run_id: str) -> str:
        """A run id from an id or a unique prefix."""
        found = self._db.execute(
            "SELECT DISTINCT run_id FROM jobs WHERE run_id >= ? AND run_id < ? LIMIT 3",
            prefix_range(run_id),
        ).fetchall()
        ids = [r[0] for r in found]
        if run_id in ids:
            return run_id
        if not ids or not run_id:
            raise JobNotFound(f"no run '{run_id}' in {self.path} — list runs with 'anylaunch ps'")
        if len(ids) > 1:
            raise UsageError(
                f"run id '{run_id}' is ambiguous ({', '.join(ids)}) — give more characters"
            )
        return ids[0]

    def newest_runs(self, limit: int, backend: str | None = None) -> Sequence[tuple[str, float]]:
        """The newest runs as (id, created_at), from the small `runs` table (every run is
        recorded there first); with `backend`, only runs with a job on it."""
        sql, args = "SELECT id, created_at FROM runs", []
        if backend:
            sql += " WHERE EXISTS (SELECT 1 FROM jobs WHERE run_id = runs.id AND backend = ?)"
            args.append(backend)
        sql += " ORDER BY created_at DESC LIMIT ?"
        return [(row[0], row[1]) for row in self._db.execute(sql, (*args, int(limit)))]

    def split_states(self, run_ids: Sequence[str]) -> dict[str, tuple[str, dict[str, int]]]:
        """Per run: its backend, and how many splits' newest attempt is in each state.

        Newest by rowid (rows are only appended): `created_at` sits after the spec and plan
        blobs in the row, and reading it would page through them for every split.
        """
        if not run_ids:
            return {}
        found = self._db.execute(
            "SELECT run_id, split_id, state, backend FROM jobs"
            f" WHERE run_id IN ({','.join('?' * len(run_ids))}) ORDER BY rowid",
            list(run_ids),
        )
        newest: dict[tuple[str, int | None], str] = {}
        backends: dict[str, str] = {}
        for run_id, split_id, state, backend in found:
            newest[run_id, split_id] = state  # a later attempt overwrites an earlier one
            backends.setdefault(run_id, backend)
        result: dict[str, tuple[str, dict[str, int]]] = {}
        for (run_id, _), state in newest.items():
            by_state = result.setdefault(run_id, (backends[run_id], {}))[1]
            by_state[state] = by_state.get(state, 0) + 1
        return result


def _open_run(db: sqlite3.Connection, key: str) -> str | None:
    row = db.execute(
        "SELECT r.id FROM runs r WHERE r.key = ? AND EXISTS (SELECT 1 FROM jobs j"
        f" WHERE j.run_id = r.id AND (j.state NOT IN {rows.TERMINAL_SQL}"
        " OR json_extract(j.meta, '$.submitter') IS NOT NULL))"
        " ORDER BY r.created_at DESC LIMIT 1",
        (key,),
    ).fetchone()
    return row[0] if row else None
