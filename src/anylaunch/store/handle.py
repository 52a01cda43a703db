"""`Store`: a handle on the job store, the SQL of each table mixed into one class."""

from __future__ import annotations

from pathlib import Path

from anylaunch.store.attempts import AttemptTables
from anylaunch.store.jobs import JobTables
from anylaunch.store.location import home, make_home
from anylaunch.store.migrations import open_migrated
from anylaunch.store.notifications import NotificationTables
from anylaunch.store.runs import RunTables
from anylaunch.store.transitions import TransitionTables
from anylaunch.store.trouble import store_trouble
from anylaunch.store.workflows import WorkflowTables


class Store(
    JobTables, AttemptTables, NotificationTables, RunTables, TransitionTables, WorkflowTables
):
    """A handle on the SQLite store; cheap to create, one connection per instance.

    Opening it brings an older store's schema up to date (`migrations.py`) and refuses
    a newer one. Every public method reports SQLite's trouble (a read-only, immutable
    or damaged file) as a StoreError of one line: the caller never sees a traceback,
    and nothing is written to a store that could not be read.
    """

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or home()
        self.path = self.root / "jobs.db"
        make_home(self.root)
        self._open()

    @store_trouble
    def _open(self) -> None:
        self._db = open_migrated(self.path)

    def close(self) -> None:
        self._db.close()

    def jobs_dir(self, job_id: str) -> Path:
        return Path(f"{self.root}/jobs/{job_id}")  # one parse: a run asks once per split


# Every public method of Store, so none can be added without it.
for _name in dir(Store):
    _member = getattr(Store, _name)
    if callable(_member) and not _name.startswith("_") and _name != "jobs_dir":
        setattr(Store, _name, store_trouble(_member))
