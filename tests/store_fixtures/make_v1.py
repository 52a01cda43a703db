"""Make `v1/jobs.db`: a job store written by the release before stores had a schema
version (`PRAGMA user_version` 0), and `v1/expected.json`: what that release's CLI said
about every job, run and workflow in it.

It must be run by THAT release, for real: check out the commit whose store had no
version and run this file with its interpreter, from anywhere:

    git worktree add /tmp/anylaunch-v1 10758d0
    cd /tmp/anylaunch-v1 && python3 -m venv .venv
    .venv/bin/pip install -q torch==2.13.0 -e '.[test]'
    .venv/bin/python /path/to/checkout/tests/store_fixtures/make_v1.py /path/to/checkout/tests/store_fixtures/v1

It runs real local jobs through `python -m anylaunch` in a scratch ANYLAUNCH_HOME: one
that succeeds, one that fails, one cancelled while it runs, one detached, a run of three
splits whose split 1 fails once and is retried, and a workflow of two steps (the second
with two splits). The store is then vacuumed into one small file (no -wal or -shm).
Its rows keep the scratch home's paths (job folders, logs), as a user's store keeps
theirs; the job folders themselves are not kept.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ENDED = {"SUCCEEDED", "FAILED", "CANCELLED"}

JOB_FILES = {
    "ok": "name: ok\nlauncher: none\ncommand: [echo, hello]\n",
    "fail": "name: fail\nlauncher: none\ncommand: [bash, -c, 'echo oops; exit 3']\n",
    "slow": "name: slow\nlauncher: none\ncommand: [sleep, '300']\n",
    "bg": "name: bg\nlauncher: none\ncommand: [bash, -c, 'sleep 1; echo later']\n",
    "sweep": """\
name: sweep
launcher: none
splits: [alpha, beta, gamma]
command:
  - bash
  - -c
  - 'echo $SPLIT_VALUE; if [ $SPLIT_ID = 1 ] && [ ! -e MARKER ]; then touch MARKER; exit 4; fi'
""",
    "pipeline": """\
name: pipeline
launcher: none
steps:
  prepare:
    command: [echo, prepared]
  train:
    needs: [prepare]
    splits: 2
    command: [bash, -c, 'echo train $SPLIT_ID']
""",
}

_LOG_PATHS = """
import json, sys
from anylaunch import api
ids = json.loads(sys.argv[1])
print(json.dumps({i: [s.path for s in api.log_sources(api.get(i).record)] for i in ids}))
"""


def _source_commit() -> str:
    """The commit of the anylaunch that wrote the store, and whether its code was changed."""
    import anylaunch

    where = Path(anylaunch.__file__).parent
    git = ["git", "-C", str(where)]
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run([*git, "status", "--porcelain", "."], capture_output=True, text=True)
    return commit.stdout.strip() + (" (changed)" if dirty.stdout.strip() else "")


def main(out: Path) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="anylaunch-v1-"))
    home = scratch / "home"
    env = {**os.environ, "ANYLAUNCH_HOME": str(home), "ANYLAUNCH_WARM": "0"}
    env["ANYLAUNCH_WORKFLOW_POLL_S"] = "0.3"

    def cli(*args: str, ok: tuple[int, ...] = (0,)) -> Any:
        done = subprocess.run(
            [sys.executable, "-m", "anylaunch", *args],
            env=env, cwd=scratch, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        if done.returncode not in ok:
            sys.exit(f"anylaunch {' '.join(args)}: exit {done.returncode}\n{done.stderr}")
        return json.loads(done.stdout) if "--json" in args else done.stdout

    def job_file(name: str) -> str:
        path = scratch / f"{name}.yaml"
        path.write_text(JOB_FILES[name].replace("MARKER", str(scratch / "split1-failed-once")))
        return str(path)

    def until_ended(job_id: str) -> None:
        for _ in range(600):
            if cli("status", job_id, "--json")["state"] in ENDED:
                return
            time.sleep(0.2)
        sys.exit(f"job {job_id} did not end")

    succeeded = cli("run", job_file("ok"), "--json")
    failed = cli("run", job_file("fail"), "--json", ok=(1,))
    cancelled = cli("run", job_file("slow"), "--detach", "--json")
    cli("cancel", cancelled["id"], "--json")
    detached = cli("run", job_file("bg"), "--detach", "--json")
    until_ended(detached["id"])
    run = cli("run", job_file("sweep"), "--json", ok=(1,))
    cli("retry", run["id"], "--failed", "--json")
    flow = cli("run", job_file("pipeline"), "--json")

    jobs = cli("ps", "--all", "--json")
    if any(j["state"] not in ENDED for j in jobs):
        sys.exit(f"a job is still live: {jobs}")
    ids = [j["id"] for j in jobs]
    log_paths = subprocess.run(
        [sys.executable, "-c", _LOG_PATHS, json.dumps(ids)],
        env=env, cwd=scratch, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    expected = {
        "made_by": "tests/store_fixtures/make_v1.py",
        "made_with": _source_commit(),
        "home": str(home),
        "jobs": jobs,
        "status": {i: cli("status", i, "--json") for i in [*ids, run["id"], flow["id"]]},
        "log_paths": json.loads(log_paths),
        "named": {
            "succeeded": succeeded["id"],
            "failed": failed["id"],
            "cancelled": cancelled["id"],
            "detached": detached["id"],
            "run": run["id"],
            "workflow": flow["id"],
        },
    }

    db = sqlite3.connect(home / "jobs.db", isolation_level=None)
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version != 0:
        sys.exit(f"the store has user_version {version}: run this with the release before it")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.execute("VACUUM")
    db.close()  # the last connection: SQLite folds the WAL back and removes -wal and -shm
    leftovers = [p.name for p in home.iterdir() if p.name.startswith("jobs.db-")]
    if leftovers:
        sys.exit(f"side files left next to the store: {leftovers}")

    out.mkdir(parents=True, exist_ok=True)
    (out / "jobs.db").write_bytes((home / "jobs.db").read_bytes())
    (out / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    shutil.rmtree(scratch)
    print(f"{out / 'jobs.db'}: {len(jobs)} jobs, {(out / 'jobs.db').stat().st_size} bytes")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "v1")
