"""The SQL of workflows: graphs of steps, each step a run, advanced by one controller
process at a time."""

from __future__ import annotations

import json
import time
from typing import Any

from anylaunch.errors import JobNotFound, UsageError
from anylaunch.store import rows
from anylaunch.store.connection import Tables
from anylaunch.store.ids import prefix_range
from anylaunch.store.processes import alive
from anylaunch.store.records import StepRow, WorkflowRecord


class WorkflowTables(Tables):
    """Workflows (mixed into Store): a workflow row, and one row per step written before
    the step's jobs are, so a step is started at most once."""

    def add_workflow(self, record: WorkflowRecord, key: str | None = None) -> str:
        """Record a workflow; with a `key` (the same `run` again) an unfinished workflow
        of that key wins: nothing is written and its id is returned."""
        now = time.time()
        record.created_at = record.updated_at = now
        with self._write() as db:
            if key is not None:
                row = db.execute(
                    f"SELECT id FROM workflows WHERE key = ? AND state NOT IN {rows.TERMINAL_SQL}"
                    " ORDER BY created_at DESC LIMIT 1",
                    (key,),
                ).fetchone()
                if row is not None:
                    return str(row[0])
            db.execute(
                "INSERT INTO workflows (id, key, name, file, doc, controller, state, created_at,"
                " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.id,
                    key,
                    record.name,
                    record.file,
                    json.dumps(record.doc),
                    json.dumps(record.controller) if record.controller else None,
                    record.state,
                    now,
                    now,
                ),
            )
        return record.id

    def get_workflow(self, workflow_id: str) -> WorkflowRecord:
        """A workflow by id or unique prefix."""
        found = self._db.execute(
            "SELECT * FROM workflows WHERE id >= ? AND id < ? ORDER BY id LIMIT 3",
            prefix_range(workflow_id),
        ).fetchall()
        exact = [r for r in found if r["id"] == workflow_id]
        if exact:
            found = exact
        if not found or not workflow_id:
            raise JobNotFound(f"no workflow '{workflow_id}' — list them with 'anylaunch ps'")
        if len(found) > 1:
            ids = ", ".join(r["id"] for r in found)
            raise UsageError(f"workflow id '{workflow_id}' is ambiguous ({ids}) — give more")
        return rows.workflow(found[0])

    def find_workflow(self, workflow_id: str) -> WorkflowRecord | None:
        """The workflow `workflow_id` names (id or unique prefix), or None."""
        try:
            return self.get_workflow(workflow_id)
        except JobNotFound:
            return None

    def workflows(self, limit: int | None = 50) -> list[WorkflowRecord]:
        sql = "SELECT * FROM workflows ORDER BY created_at DESC"
        found = self._db.execute(sql + (" LIMIT ?" if limit else ""), (limit,) if limit else ())
        return [rows.workflow(r) for r in found.fetchall()]

    def claim_controller(self, workflow_id: str, process: dict[str, Any]) -> bool:
        """Become the one process that advances a workflow: True if none is recorded, the
        recorded one is dead (a crash, a reboot), or it is `process` already."""
        with self._write() as db:
            row = db.execute(
                "SELECT controller FROM workflows WHERE id = ?", (workflow_id,)
            ).fetchone()
            if row is None:
                return False
            owner = json.loads(row["controller"]) if row["controller"] else None
            same = owner and owner.get("pid") == process["pid"]
            if owner and not same and alive(owner):
                return False
            db.execute(
                "UPDATE workflows SET controller = ?, updated_at = ? WHERE id = ?",
                (json.dumps(process), time.time(), workflow_id),
            )
            return True

    def set_workflow_state(self, workflow_id: str, state: str) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE workflows SET state = ?, updated_at = ? WHERE id = ? AND state != ?",
                (state, time.time(), workflow_id, state),
            )

    def set_workflow_doc(self, workflow_id: str, doc: dict[str, Any]) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE workflows SET doc = ?, updated_at = ? WHERE id = ?",
                (json.dumps(doc), time.time(), workflow_id),
            )

    def request_cancel_workflow(self, workflow_id: str) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE workflows SET cancel_requested_at = COALESCE(cancel_requested_at, ?)"
                " WHERE id = ?",
                (time.time(), workflow_id),
            )

    def clear_cancel_workflow(self, workflow_id: str) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE workflows SET cancel_requested_at = NULL WHERE id = ?", (workflow_id,)
            )

    def claim_step(self, workflow_id: str, step_id: str, run_id: str) -> bool:
        """Record the intent to start a step; False if it was recorded before (started,
        or being started), so no step is ever started twice."""
        with self._write() as db:
            cursor = db.execute(
                "INSERT OR IGNORE INTO workflow_steps (workflow_id, step_id, run_id, created_at)"
                " VALUES (?, ?, ?, ?)",
                (workflow_id, step_id, run_id, time.time()),
            )
            return cursor.rowcount == 1

    def step_rows(self, workflow_id: str) -> dict[str, StepRow]:
        found = self._db.execute(
            "SELECT * FROM workflow_steps WHERE workflow_id = ?", (workflow_id,)
        ).fetchall()
        return {
            r["step_id"]: StepRow(r["step_id"], r["run_id"], r["error"], r["created_at"])
            for r in found
        }

    def set_step_error(self, workflow_id: str, step_id: str, error: str | None) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE workflow_steps SET error = ? WHERE workflow_id = ? AND step_id = ?",
                (error, workflow_id, step_id),
            )

    def forget_step(self, workflow_id: str, step_id: str) -> None:
        """A step that never got a job (its submit was refused): may be started again."""
        with self._write() as db:
            db.execute(
                "DELETE FROM workflow_steps WHERE workflow_id = ? AND step_id = ?"
                " AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.run_id = workflow_steps.run_id)",
                (workflow_id, step_id),
            )
