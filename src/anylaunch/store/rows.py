"""How a row of the store reads as a record, and the pieces of SQL that every table's
code shares."""

from __future__ import annotations

import json
import sqlite3

from anylaunch.state import TERMINAL, State
from anylaunch.store.records import JobRecord, WorkflowRecord

# The terminal states as an SQL list, from the one definition (state.TERMINAL).
TERMINAL_SQL = "(" + ",".join(f"'{s.value}'" for s in sorted(TERMINAL)) + ")"

# A job without its spec and plan blobs: what lists and polls read.
SUMMARY_COLUMNS = (
    "id, name, backend, native_id, state, exit_code, detail, run_id, split_id, job_dir, "
    "meta, source, created_at, updated_at, cancel_requested_at"
)


def job(row: sqlite3.Row, *, full: bool) -> JobRecord:
    """A job from its row; `full`: the row has the spec and plan too."""
    record = JobRecord(
        id=row["id"],
        name=row["name"],
        backend=row["backend"],
        state=State(row["state"]),
        job_dir=row["job_dir"],
        native_id=row["native_id"],
        exit_code=row["exit_code"],
        detail=row["detail"],
        run_id=row["run_id"],
        split_id=row["split_id"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        cancel_requested_at=row["cancel_requested_at"],
    )
    record.meta = json.loads(row["meta"])
    record.source = json.loads(row["source"]) if row["source"] else None
    if full:
        record.spec = json.loads(row["spec"])
        record.plan = json.loads(row["plan"])
    return record


def workflow(row: sqlite3.Row) -> WorkflowRecord:
    return WorkflowRecord(
        id=row["id"],
        name=row["name"],
        file=row["file"],
        doc=json.loads(row["doc"]),
        state=row["state"],
        controller=json.loads(row["controller"]) if row["controller"] else None,
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        cancel_requested_at=row["cancel_requested_at"],
    )
