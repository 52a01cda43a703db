"""One connection to the store's file, and the one way to write through it.

Several `anylaunch` processes (a `run` waiting, a `ps`, a detached supervisor writing the
final state) share one file. WAL lets readers proceed during a write; writes take the
lock up front (`BEGIN IMMEDIATE`) with a long busy timeout so no caller ever sees
"database is locked".
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path


def connect(path: Path) -> sqlite3.Connection:
    """A connection as every part of the store uses it: rows by name, long waits for the
    lock, and statements outside `write` each their own transaction."""
    db = sqlite3.connect(path, timeout=60, isolation_level=None)
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA busy_timeout = 60000")
    db.execute("PRAGMA synchronous = NORMAL")
    return db


@contextmanager
def write(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A write transaction that holds the lock from its first statement."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        if db.in_transaction:  # SQLite may have rolled back already
            db.execute("ROLLBACK")
        raise
    else:
        db.execute("COMMIT")


class Tables:
    """What the SQL of each table (mixed into Store) works through: the connection, the
    file it is on (named in errors), and write transactions."""

    _db: sqlite3.Connection
    path: Path

    def _write(self) -> AbstractContextManager[sqlite3.Connection]:
        return write(self._db)
