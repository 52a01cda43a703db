"""The SQL of each schema version: what each migration runs (`migrations.py` orders
them). A version, once released, is never edited: a change is a new version."""

from __future__ import annotations

# Version 1: the store as the releases before schema versions created it, statement for
# statement. Every statement is IF NOT EXISTS: those stores (version 0) hold these
# tables already, or the older of them, and keep every row.
V1 = """
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

# Version 2: workflows found by key and listed newest first through an index, as jobs
# and runs are. Without it, `run` of a workflow file (is one of its key unfinished?) and
# the dashboard's list of the newest workflows read every workflow ever recorded, each
# with its document (every step's spec). From here on no statement says IF NOT EXISTS:
# a migration applied twice fails loudly instead of passing unseen.
V2 = """
CREATE INDEX workflows_key ON workflows (key, created_at);
CREATE INDEX workflows_created ON workflows (created_at);
"""

# Version 3: which code each job ran (`source`: JSON of the git repository, commit, branch
# and dirty flag of the folder its code came from, and its snapshot's hash), as a column
# of its own: `ps` reads it with the other summary columns, and a job's `meta` is rewritten
# by its submit and its polls.
V3 = """
ALTER TABLE jobs ADD COLUMN source TEXT;
"""

# Version 4: the announcements of a job's end (`notify:` in the job file), one row per
# job and target, written with the job. A row is claimed before anything is sent, so of
# many processes that see the same end only one sends; `sending` by a process that died
# is sent again (with the same key: at least once, never silently lost).
V4 = """
CREATE TABLE notifications (
    job_id TEXT NOT NULL REFERENCES jobs (id),
    target INTEGER NOT NULL,
    status TEXT NOT NULL,
    state TEXT,
    tries INTEGER NOT NULL DEFAULT 0,
    next_at REAL NOT NULL DEFAULT 0,
    sender TEXT,
    error TEXT,
    sent_at REAL,
    by TEXT,
    PRIMARY KEY (job_id, target)
);
CREATE INDEX notifications_status ON notifications (status, job_id);
"""

# Version 5: the attempts of each job. A job is one thing the user launched; an attempt is
# one run of it on its backend (the first, a resubmission after an eviction, a Slurm
# requeue, the next try its retry policy made). Each keeps where it ran, how it ended,
# its diagnosis, why the next one was made and the nodes it was kept away from, so
# `status` can say what happened to every try and not only to the last. Jobs recorded
# before this version have no rows here: their one attempt is read from the job itself.
V5 = """
CREATE TABLE attempts (
    job_id TEXT NOT NULL REFERENCES jobs (id),
    number INTEGER NOT NULL,
    native_id TEXT,
    started_at REAL,
    ended_at REAL,
    state TEXT,
    exit_code INTEGER,
    nodes TEXT NOT NULL DEFAULT '[]',
    avoided TEXT NOT NULL DEFAULT '[]',
    diagnosis TEXT,
    next TEXT,
    PRIMARY KEY (job_id, number)
);
"""
