"""The job store: every job recorded on the submitting host, in SQLite (WAL).

Several `anylaunch` processes (a `run` waiting, a `ps`, a detached supervisor writing the
final state) share one file, `$ANYLAUNCH_HOME/jobs.db`. Its schema carries a version and
migrates forward when a newer anylaunch opens it; a store newer than the code is refused
and left as it is.

- `records.py`: the records (JobRecord, Attempt, Update, WorkflowRecord, StepRow); `rows.py`: a row
  read as a record.
- `connection.py`: the connection and its write transaction (`BEGIN IMMEDIATE`).
- `schema.py`, `migrations.py`: the SQL of each schema version, and how a store gets it.
- `jobs.py`, `attempts.py`, `transitions.py`, `runs.py`, `workflows.py`: the SQL of each
  table, mixed into `Store` (`handle.py`).
- `ids.py`, `processes.py`, `location.py`, `trouble.py`: ids, submitter processes,
  `$ANYLAUNCH_HOME`, and SQLite's errors as one line.
"""

from anylaunch.store.handle import Store
from anylaunch.store.ids import new_id, prefix_range
from anylaunch.store.location import home
from anylaunch.store.processes import alive, busy_elsewhere, this_process
from anylaunch.store.records import Attempt, JobRecord, StepRow, Update, WorkflowRecord
from anylaunch.store.workflows import WorkflowTables

__all__ = [
    "Attempt",
    "JobRecord",
    "StepRow",
    "Store",
    "Update",
    "WorkflowRecord",
    "WorkflowTables",
    "alive",
    "busy_elsewhere",
    "home",
    "new_id",
    "prefix_range",
    "this_process",
]
