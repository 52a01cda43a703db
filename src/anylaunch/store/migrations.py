"""The store's schema version (`PRAGMA user_version`) and the ordered migrations that
bring an older store up to it.

A store is at the version of the last migration applied to it; a new store is an empty
file at version 0, and gets them all. Each migration is applied in ONE write transaction
that also sets the version, so a crash part-way leaves the store whole at the version
before, and the next open applies it again. Processes that open an old store at once
queue on the write lock and read the version again under it: each migration runs once.

A store newer than this code (a later release wrote it) is refused, and never written:
its version is read from the file's header before the store is opened for real, because
SQLite would create a -wal and a -shm beside it merely to read it.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from anylaunch.errors import StoreError
from anylaunch.store import schema
from anylaunch.store.connection import connect, write


@dataclass(frozen=True)
class Migration:
    version: int  # the store's version once this is applied
    sql: str  # statements separated by ';'

    def statements(self) -> list[str]:
        return [s.strip() for s in self.sql.split(";") if s.strip()]


MIGRATIONS = (
    Migration(1, schema.V1),
    Migration(2, schema.V2),
    Migration(3, schema.V3),
    Migration(4, schema.V4),
    Migration(5, schema.V5),
)


def open_migrated(path: Path, migrations: Sequence[Migration] = MIGRATIONS) -> sqlite3.Connection:
    """A connection to the store at `path`, its schema brought to the newest version."""
    _refuse_newer(path, header_version(path), migrations)
    db = connect(path)
    try:
        upgrade(db, path, migrations)
    except BaseException:
        db.close()
        raise
    return db


def upgrade(db: sqlite3.Connection, path: Path, migrations: Sequence[Migration]) -> None:
    """Apply the migrations the store lacks, in order, each in one transaction."""
    current = _version(db, path, migrations)
    pending = [m for m in migrations if m.version > current]
    for attempt in range(50):
        try:
            if pending:
                # A new store's first write. Switching to WAL takes an exclusive lock
                # that the busy timeout may not cover: racing processes retry.
                db.execute("PRAGMA journal_mode = WAL")
            for migration in pending:
                with write(db):
                    if _version(db, path, migrations) >= migration.version:
                        continue  # another process applied it while this one waited
                    for statement in migration.statements():
                        db.execute(statement)
                    db.execute(f"PRAGMA user_version = {int(migration.version)}")
            return
        except sqlite3.OperationalError as exc:
            if attempt == 49 or "locked" not in str(exc):  # only a race is worth a retry
                raise
            time.sleep(0.1)


def header_version(path: Path) -> int | None:
    """The schema version in the file's header, or None when there is no SQLite file to
    read (absent, unreadable or damaged: opening it for real then says why).

    Read by SQLite as an immutable file: no lock, no -wal or -shm, nothing written. Not
    with open() and close(): closing any descriptor of the file drops every lock this
    process holds on it, and another process could then take this process's
    connections for gone and delete the WAL under them.
    """
    uri = f"file:{quote(str(path))}?mode=ro&immutable=1"
    try:
        db = sqlite3.connect(uri, uri=True)
    except sqlite3.Error:
        return None
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.Error:
        return None
    finally:
        db.close()


def _version(db: sqlite3.Connection, path: Path, migrations: Sequence[Migration]) -> int:
    version = int(db.execute("PRAGMA user_version").fetchone()[0])
    _refuse_newer(path, version, migrations)
    return version


def _refuse_newer(path: Path, version: int | None, migrations: Sequence[Migration]) -> None:
    newest = migrations[-1].version
    if version is not None and version > newest:
        raise StoreError(
            f"job store {path} is at schema version {version}, newer than this anylaunch"
            f" knows ({newest}) — a later release of anylaunch wrote it: use that release"
            " or a newer one, or set ANYLAUNCH_HOME to another folder; the file was left"
            " as it is"
        )
