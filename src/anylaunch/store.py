"""The job store: every job recorded on the submitting host, in SQLite (WAL).

Several `anylaunch` processes (a `run` waiting, a `ps`, a detached supervisor writing the
final state) share one file. WAL lets readers proceed during a write; writes take the
lock up front (`BEGIN IMMEDIATE`) with a long busy timeout so no caller ever sees
"database is locked". A job is recorded *before* it is submitted, so a crash mid-submit
leaves a row to reconcile rather than an untracked job.
"""

from __future__ import annotations

import builtins
import functools
import json
import os
import random
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from anylaunch.errors import JobNotFound, StoreError, UsageError
from anylaunch.state import TERMINAL, State, may_become_unknown, may_move

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    backend TEXT NOT NULL,
    native_id TEXT,
    state TEXT NOT NULL,
    exit_code INTEGER,
    detail TEXT,
    run_id TEXT,
    split_id INTEGER,
    job_dir TEXT NOT NULL,
    spec TEXT NOT NULL,
    plan TEXT NOT NULL,
    meta TEXT NOT NULL DEFAULT '{}',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    cancel_requested_at REAL
);
CREATE INDEX IF NOT EXISTS jobs_created ON jobs (created_at);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs (state);
CREATE INDEX IF NOT EXISTS jobs_run ON jobs (run_id);
CREATE TABLE IF NOT EXISTS events (
    job_id TEXT NOT NULL REFERENCES jobs (id),
    at REAL NOT NULL,
    state TEXT NOT NULL,
    detail TEXT
);
CREATE INDEX IF NOT EXISTS events_job ON events (job_id, at);
CREATE TABLE IF NOT EXISTS ports (
    port INTEGER PRIMARY KEY,
    job_id TEXT NOT NULL,
    at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    key TEXT,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_key ON runs (key, created_at);
CREATE TABLE IF NOT EXISTS workflows (
    id TEXT PRIMARY KEY,
    key TEXT,
    name TEXT NOT NULL,
    file TEXT NOT NULL,
    doc TEXT NOT NULL,
    controller TEXT,
    state TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    cancel_requested_at REAL
);
CREATE TABLE IF NOT EXISTS workflow_steps (
    workflow_id TEXT NOT NULL REFERENCES workflows (id),
    step_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    error TEXT,
    created_at REAL NOT NULL,
    PRIMARY KEY (workflow_id, step_id)
);
"""

# The terminal states as an SQL list, from the one definition (state.TERMINAL).
_TERMINAL_SQL = "(" + ",".join(f"'{s.value}'" for s in sorted(TERMINAL)) + ")"

_ID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # no i, l, o, u: easy to read aloud


def home() -> Path:
    """`$ANYLAUNCH_HOME`, default `~/.anylaunch`."""
    return Path(os.environ.get("ANYLAUNCH_HOME") or Path.home() / ".anylaunch").expanduser()


def prefix_range(prefix: str) -> tuple[str, str]:
    """Bounds of the ids that start with `prefix`, for `id >= ? AND id < ?`.

    SQLite's LIKE is case-insensitive, so it cannot use the id index and reads every row
    (most of a second at 1,000,000 jobs); a range on the index reads only the matches.
    Every id sorts below the prefix followed by the highest code point.
    """
    return prefix, prefix + "\U0010ffff"


# The operating system's randomness, as `secrets.choice` draws it; the secrets module would
# bring hmac and hashlib (OpenSSL) into every command that opens the store.
_RANDOM = random.SystemRandom()


def new_id() -> str:
    return "".join(_RANDOM.choice(_ID_ALPHABET) for _ in range(8))


def this_process() -> dict[str, float]:
    """Who is submitting: pid and start time, so a dead submitter can be told from a reused pid."""
    from anylaunch.proctime import create_time

    return {"pid": os.getpid(), "started": create_time()}


def alive(process: dict[str, Any] | None) -> bool:
    """Whether the process `this_process()` described (on this host) still runs."""
    import psutil

    if not process:
        return False
    try:
        proc = psutil.Process(int(process["pid"]))
        return (
            abs(proc.create_time() - float(process["started"])) < 0.5
            and proc.status() != psutil.STATUS_ZOMBIE
        )
    except (psutil.NoSuchProcess, KeyError, TypeError, ValueError):
        return False


def busy_elsewhere(process: dict[str, Any] | None) -> bool:
    """Whether another live process (not this one) is submitting the job."""
    return alive(process) and process is not None and process.get("pid") != os.getpid()


@dataclass
class JobRecord:
    """One row of the store, as the rest of the code sees it."""

    id: str
    name: str
    backend: str
    state: State
    job_dir: str
    native_id: str | None = None
    exit_code: int | None = None
    detail: str | None = None
    run_id: str | None = None
    split_id: int | None = None
    spec: dict[str, Any] = field(default_factory=dict)
    plan: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0
    updated_at: float = 0.0
    cancel_requested_at: float | None = None
    # Not stored: set by a poll whose backend did not answer, the line saying so; the
    # state shown is then the last known one.
    stale: str | None = field(default=None, compare=False)

    def summary(self) -> dict[str, Any]:
        """The stable `--json` shape of a job (contract: id, state, backend, native_id, exit_code)."""
        return {
            "id": self.id,
            "kind": "job",
            "name": self.name,
            "state": self.state.value,
            "backend": self.backend,
            "native_id": self.native_id,
            "exit_code": self.exit_code,
            "detail": self.detail,
            "run_id": self.run_id,
            "split_id": self.split_id,
            "job_dir": self.job_dir,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "stale": self.stale,
        }


_SUMMARY_COLUMNS = (
    "id, name, backend, native_id, state, exit_code, detail, run_id, split_id, job_dir, "
    "meta, created_at, updated_at, cancel_requested_at"
)


@dataclass(frozen=True)
class Update:
    """What one poll learned about one job, as the store writes it (`Store.apply`).

    `state` None: the poll said nothing about the state (a `detail` still updates a live
    job's, as `note` does). `native_id`/`meta`: the job's
    new native id or metadata (a launch request became a job, a resubmission was made);
    written only while the stored native id is still `expected_native_id`, so of two
    processes polling one job only the first records the change, and only if it changes
    something, so a repeated observation writes nothing twice. `events` are written with
    that change. `attempt`: the change starts a new attempt of the job, which a job that
    ended or was asked to cancel must never get.
    """

    job_id: str
    state: State | None = None
    exit_code: int | None = None
    detail: str | None = None
    final: bool = False  # UNKNOWN for good (see `mark_unknown`)
    native_id: str | None = None
    expected_native_id: str | None = None
    meta: dict[str, Any] | None = None
    events: tuple[str, ...] = ()
    attempt: bool = False


class _OnFile(Protocol):
    path: Path  # the database file, named in errors


_S = TypeVar("_S", bound=_OnFile)
_P = ParamSpec("_P")
_R = TypeVar("_R")


def _store_trouble(
    method: Callable[Concatenate[_S, _P], _R],
) -> Callable[Concatenate[_S, _P], _R]:
    """SQLite's errors as one line that names the file and what to do about it."""

    @functools.wraps(method)
    def wrapper(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as exc:
            raise StoreError(_explain(self.path, exc)) from None

    return wrapper


def _explain(path: Path, exc: sqlite3.Error) -> str:
    why = " ".join(str(exc).split()) or type(exc).__name__
    name = getattr(exc, "sqlite_errorname", "")
    if "READONLY" in name or "readonly" in why:
        fix = (
            f"make it writable (chmod u+w {path}; an immutable file: lsattr, chattr -i)"
            " or set ANYLAUNCH_HOME to a writable folder"
        )
    elif "CORRUPT" in name or "NOTADB" in name or "not a database" in why or "malformed" in why:
        fix = (
            f"move it aside (mv {path} {path}.damaged) and anylaunch starts a new store;"
            f" the old one stays for recovery (sqlite3 {path}.damaged .recover)"
        )
    elif "CANTOPEN" in name or "unable to open" in why:
        fix = f"check that {path.parent} is a folder you can write, or set ANYLAUNCH_HOME"
    elif "FULL" in name or "IOERR" in name:
        fix = f"check the disk that holds {path.parent} (space, errors)"
    else:
        fix = "check the file, or set ANYLAUNCH_HOME to another folder"
    return f"job store {path}: {why} — {fix}"


@dataclass
class WorkflowRecord:
    """One workflow: its steps as planned (`doc`), who advances it, and its last state."""

    id: str
    name: str
    file: str
    doc: dict[str, Any]
    state: str
    controller: dict[str, Any] | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    cancel_requested_at: float | None = None


@dataclass
class StepRow:
    """A step the controller decided to start: the run that holds its jobs, and the
    error that kept it from being submitted, if one did."""

    step_id: str
    run_id: str
    error: str | None
    created_at: float


class WorkflowTables:
    """The workflow half of the store (mixed into Store): a workflow row, and one row per
    step written before the step's jobs are, so a step is started at most once."""

    _db: sqlite3.Connection
    path: Path

    def _write(self) -> Any:  # provided by Store
        raise NotImplementedError

    @_store_trouble
    def add_workflow(self, record: WorkflowRecord, key: str | None = None) -> str:
        """Record a workflow; with a `key` (the same `run` again) an unfinished workflow
        of that key wins: nothing is written and its id is returned."""
        now = time.time()
        record.created_at = record.updated_at = now
        with self._write() as db:
            if key is not None:
                row = db.execute(
                    f"SELECT id FROM workflows WHERE key = ? AND state NOT IN {_TERMINAL_SQL}"
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

    @_store_trouble
    def get_workflow(self, workflow_id: str) -> WorkflowRecord:
        """A workflow by id or unique prefix."""
        rows = self._db.execute(
            "SELECT * FROM workflows WHERE id >= ? AND id < ? ORDER BY id LIMIT 3",
            prefix_range(workflow_id),
        ).fetchall()
        exact = [r for r in rows if r["id"] == workflow_id]
        if exact:
            rows = exact
        if not rows or not workflow_id:
            raise JobNotFound(f"no workflow '{workflow_id}' — list them with 'anylaunch ps'")
        if len(rows) > 1:
            ids = ", ".join(r["id"] for r in rows)
            raise UsageError(f"workflow id '{workflow_id}' is ambiguous ({ids}) — give more")
        return _workflow(rows[0])

    @_store_trouble
    def find_workflow(self, workflow_id: str) -> WorkflowRecord | None:
        """The workflow `workflow_id` names (id or unique prefix), or None."""
        try:
            return self.get_workflow(workflow_id)
        except JobNotFound:
            return None

    @_store_trouble
    def workflows(self, limit: int | None = 50) -> list[WorkflowRecord]:
        sql = "SELECT * FROM workflows ORDER BY created_at DESC"
        rows = self._db.execute(sql + (" LIMIT ?" if limit else ""), (limit,) if limit else ())
        return [_workflow(r) for r in rows.fetchall()]

    @_store_trouble
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

    @_store_trouble
    def set_workflow_state(self, workflow_id: str, state: str) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE workflows SET state = ?, updated_at = ? WHERE id = ? AND state != ?",
                (state, time.time(), workflow_id, state),
            )

    @_store_trouble
    def set_workflow_doc(self, workflow_id: str, doc: dict[str, Any]) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE workflows SET doc = ?, updated_at = ? WHERE id = ?",
                (json.dumps(doc), time.time(), workflow_id),
            )

    @_store_trouble
    def request_cancel_workflow(self, workflow_id: str) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE workflows SET cancel_requested_at = COALESCE(cancel_requested_at, ?)"
                " WHERE id = ?",
                (time.time(), workflow_id),
            )

    @_store_trouble
    def clear_cancel_workflow(self, workflow_id: str) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE workflows SET cancel_requested_at = NULL WHERE id = ?", (workflow_id,)
            )

    @_store_trouble
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

    @_store_trouble
    def step_rows(self, workflow_id: str) -> dict[str, StepRow]:
        rows = self._db.execute(
            "SELECT * FROM workflow_steps WHERE workflow_id = ?", (workflow_id,)
        ).fetchall()
        return {
            r["step_id"]: StepRow(r["step_id"], r["run_id"], r["error"], r["created_at"])
            for r in rows
        }

    @_store_trouble
    def set_step_error(self, workflow_id: str, step_id: str, error: str | None) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE workflow_steps SET error = ? WHERE workflow_id = ? AND step_id = ?",
                (error, workflow_id, step_id),
            )

    @_store_trouble
    def forget_step(self, workflow_id: str, step_id: str) -> None:
        """A step that never got a job (its submit was refused): may be started again."""
        with self._write() as db:
            db.execute(
                "DELETE FROM workflow_steps WHERE workflow_id = ? AND step_id = ?"
                " AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.run_id = workflow_steps.run_id)",
                (workflow_id, step_id),
            )


def _workflow(row: sqlite3.Row) -> WorkflowRecord:
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


class Store(WorkflowTables):
    """A handle on the SQLite store; cheap to create, one connection per instance.

    Every public method reports SQLite's trouble (a read-only, immutable or damaged
    file) as a StoreError of one line: the caller never sees a traceback, and nothing
    is written to a store that could not be read.
    """

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or home()
        self.path = self.root / "jobs.db"
        _make_home(self.root)
        self._open()

    @_store_trouble
    def _open(self) -> None:
        self._db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA busy_timeout = 60000")
        self._db.execute("PRAGMA synchronous = NORMAL")
        # The newest table: an older store gets what it lacks (every statement is IF NOT EXISTS).
        newest = "SELECT 1 FROM sqlite_master WHERE name = 'workflow_steps'"
        if self._db.execute(newest).fetchone() is None:
            self._create()

    def _create(self) -> None:
        """First use of a store: WAL mode and the schema, safe when processes race on it."""
        for attempt in range(50):
            try:
                # Switching to WAL takes an exclusive lock that the busy timeout may not cover.
                self._db.execute("PRAGMA journal_mode = WAL")
                with self._write() as db:
                    for statement in filter(None, (s.strip() for s in _SCHEMA.split(";"))):
                        db.execute(statement)
                return
            except sqlite3.OperationalError as exc:
                if attempt == 49 or "locked" not in str(exc):  # only a race is worth a retry
                    raise
                time.sleep(0.1)

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that holds the lock from its first statement."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            if self._db.in_transaction:  # SQLite may have rolled back already
                self._db.execute("ROLLBACK")
            raise
        else:
            self._db.execute("COMMIT")

    def jobs_dir(self, job_id: str) -> Path:
        return Path(f"{self.root}/jobs/{job_id}")  # one parse: a run asks once per split

    # -- writes ---------------------------------------------------------------------------

    def add(self, record: JobRecord) -> JobRecord:
        """Record a job before it is submitted (state PENDING, no native id yet)."""
        return self.add_many([record])[0]

    def add_many(self, records: list[JobRecord]) -> list[JobRecord]:
        """Record many jobs in one transaction (the splits of a run: all or none)."""
        with self._write() as db:
            self._insert(db, records)
        return records

    def add_run(self, run_id: str, key: str | None, records: list[JobRecord]) -> str:
        """Record a run and all its splits in one transaction, before anything is submitted.

        With a `key` (the same command run again), an unfinished run of that key wins:
        nothing is written and its id is returned, so two `anylaunch run` of the same
        file never both submit it.
        """
        with self._write() as db:
            if key is not None:
                found = self._open_run(db, key)
                if found is not None:
                    return found
            db.execute(
                "INSERT INTO runs (id, key, created_at) VALUES (?, ?, ?)",
                (run_id, key, time.time()),
            )
            self._insert(db, records)
        return run_id

    def open_run(self, key: str) -> str | None:
        """The newest run of `key` with a split that is live, or whose submission was
        never settled (a crash between recording and submitting), if any."""
        return self._open_run(self._db, key)

    @staticmethod
    def _open_run(db: sqlite3.Connection, key: str) -> str | None:
        row = db.execute(
            "SELECT r.id FROM runs r WHERE r.key = ? AND EXISTS (SELECT 1 FROM jobs j"
            f" WHERE j.run_id = r.id AND (j.state NOT IN {_TERMINAL_SQL}"
            " OR json_extract(j.meta, '$.submitter') IS NOT NULL))"
            " ORDER BY r.created_at DESC LIMIT 1",
            (key,),
        ).fetchone()
        return row[0] if row else None

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

    def _insert(self, db: sqlite3.Connection, records: list[JobRecord]) -> None:
        now = time.time()
        me = this_process()
        rows, events = [], []
        for record in records:
            record.created_at = record.updated_at = now
            if record.native_id is None:
                # Who submits it: a row left without a native id by a dead submitter is
                # reconciled with the backend rather than left PENDING forever.
                record.meta = {**record.meta, "submitter": record.meta.get("submitter", me)}
            rows.append(
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
                    now,
                    now,
                )
            )
            events.append((record.id, now, record.state.value, "recorded"))
        db.executemany(
            "INSERT INTO jobs (id, name, backend, native_id, state, exit_code, detail, run_id,"
            " split_id, job_dir, spec, plan, meta, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        db.executemany("INSERT INTO events (job_id, at, state, detail) VALUES (?, ?, ?, ?)", events)

    def set_native(self, job_id: str, native_id: str, meta: dict[str, Any] | None = None) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE jobs SET native_id = ?, meta = ?, updated_at = ? WHERE id = ?",
                (native_id, json.dumps(meta or {}), time.time(), job_id),
            )

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
        with self._write() as db:
            now = time.time()
            for update in updates:
                row = db.execute(
                    f"SELECT {_SUMMARY_COLUMNS} FROM jobs WHERE id = ?", (update.job_id,)
                ).fetchone()
                if row is None:
                    continue
                _apply_one(db, row, update, now)
                out[update.job_id] = _record(
                    db.execute(
                        f"SELECT {_SUMMARY_COLUMNS} FROM jobs WHERE id = ?", (update.job_id,)
                    ).fetchone(),
                    full=False,
                )
        return out

    def note(self, job_id: str, detail: str) -> None:
        """Update a live job's detail (why it is pending) without an event per poll."""
        with self._write() as db:
            db.execute(
                "UPDATE jobs SET detail = ?, updated_at = ? WHERE id = ? AND detail IS NOT ?"
                f" AND state NOT IN {_TERMINAL_SQL}",
                (detail, time.time(), job_id, detail),
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
        rows = self._db.execute(
            "SELECT * FROM jobs WHERE id = ? UNION ALL"
            " SELECT * FROM jobs WHERE id >= ? AND id < ? AND id != ? LIMIT 3",
            (job_id, *prefix_range(job_id), job_id),
        ).fetchall()
        if not rows or not job_id:
            raise JobNotFound(f"no job '{job_id}' in {self.path} — list jobs with 'anylaunch ps'")
        if rows[0]["id"] != job_id and len(rows) > 1:
            ids = ", ".join(r["id"] for r in rows)
            raise UsageError(f"job id '{job_id}' is ambiguous ({ids}) — give more characters")
        return _record(rows[0], full=True)

    def list(
        self,
        *,
        limit: int | None = 50,
        states: Sequence[State] = (),
        backend: str | None = None,
        run_id: str | None = None,
    ) -> list[JobRecord]:
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
        sql = f"SELECT {_SUMMARY_COLUMNS} FROM jobs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [_record(row, full=False) for row in self._db.execute(sql, args)]

    def load_blobs(self, records: Sequence[JobRecord]) -> None:
        """Give records read by `list` (summary columns) their spec and plan, one query
        per 500 of them; records that have a plan already are left as they are."""
        wanted = {r.id: r for r in records if not r.plan}
        ids = list(wanted)
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            rows = self._db.execute(
                f"SELECT id, spec, plan FROM jobs WHERE id IN ({','.join('?' * len(chunk))})",
                chunk,
            )
            for row in rows:
                wanted[row["id"]].spec = json.loads(row["spec"])
                wanted[row["id"]].plan = json.loads(row["plan"])

    def count_attempts(self, run_id: str, split_id: int | None) -> int:
        """Jobs already recorded for this split of this run (its earlier attempts)."""
        row = self._db.execute(
            "SELECT COUNT(*) FROM jobs WHERE run_id = ? AND split_id IS ?", (run_id, split_id)
        ).fetchone()
        return row[0]

    def resolve_run(self, run_id: str) -> str:
        """A run id from an id or a unique prefix."""
        rows = self._db.execute(
            "SELECT DISTINCT run_id FROM jobs WHERE run_id >= ? AND run_id < ? LIMIT 3",
            prefix_range(run_id),
        ).fetchall()
        ids = [r[0] for r in rows]
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
        rows = self._db.execute(
            "SELECT run_id, split_id, state, backend FROM jobs"
            f" WHERE run_id IN ({','.join('?' * len(run_ids))}) ORDER BY rowid",
            list(run_ids),
        )
        newest: dict[tuple[str, int | None], str] = {}
        backends: dict[str, str] = {}
        for run_id, split_id, state, backend in rows:
            newest[run_id, split_id] = state  # a later attempt overwrites an earlier one
            backends.setdefault(run_id, backend)
        result: dict[str, tuple[str, dict[str, int]]] = {}
        for (run_id, _), state in newest.items():
            by_state = result.setdefault(run_id, (backends[run_id], {}))[1]
            by_state[state] = by_state.get(state, 0) + 1
        return result

    def events(self, job_id: str) -> builtins.list[dict[str, Any]]:  # `list` is a method here
        """A job's history, oldest first; each event's id is the job's and its place in it."""
        rows = self._db.execute(
            "SELECT at, state, detail FROM events WHERE job_id = ? ORDER BY at, rowid", (job_id,)
        )
        return [{"id": f"{job_id}/{n}", "kind": "event", **dict(row)} for n, row in enumerate(rows)]

    def count(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]


def _make_home(root: Path) -> None:
    """ANYLAUNCH_HOME as a folder, or one line saying why it cannot be."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise StoreError(
            f"ANYLAUNCH_HOME {root} is not a folder (a file is in the way)"
            " — point ANYLAUNCH_HOME at a folder, or move the file away"
        ) from None
    except OSError as exc:
        raise StoreError(
            f"ANYLAUNCH_HOME {root} cannot be created ({exc.strerror})"
            " — point ANYLAUNCH_HOME at a folder you can write"
        ) from None


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
    return True


def _apply_one(db: sqlite3.Connection, row: sqlite3.Row, update: Update, now: float) -> None:
    """One job of `Store.apply`, inside its transaction."""
    job_id, current = update.job_id, State(row["state"])
    if update.native_id is not None or update.meta is not None:
        _reidentify(db, row, update, now)
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
    meta = json.dumps(update.meta) if update.meta is not None else row["meta"]
    if native_id == row["native_id"] and meta == row["meta"]:
        return  # already recorded: the same observation twice writes nothing twice
    db.execute(
        "UPDATE jobs SET native_id = ?, meta = ?, updated_at = ? WHERE id = ?",
        (native_id, meta, now, update.job_id),
    )
    db.executemany(
        "INSERT INTO events (job_id, at, state, detail) VALUES (?, ?, ?, ?)",
        [(update.job_id, now, row["state"], event) for event in update.events],
    )


# Every public method of Store, so none can be added without it.
for _name, _member in list(vars(Store).items()):
    if callable(_member) and not _name.startswith("_") and _name != "jobs_dir":
        setattr(Store, _name, _store_trouble(_member))


def _record(row: sqlite3.Row, *, full: bool) -> JobRecord:
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
    if full:
        record.spec = json.loads(row["spec"])
        record.plan = json.loads(row["plan"])
    return record
