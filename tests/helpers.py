"""Helpers shared by test modules of every backend (importable as `helpers`)."""

from __future__ import annotations

import random
import socket
import sqlite3
import sys
import time
from pathlib import Path
from urllib.parse import quote

import psutil


def wait_until(predicate, timeout: float = 60, what: str = "condition", interval: float = 0.1):
    """Poll `predicate` until it is true (returned) or `timeout` seconds pass (an error)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def job_processes(job_id: str) -> list[psutil.Process]:
    """Every process on this machine that belongs to the job (by ANYLAUNCH_JOB_ID)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("ANYLAUNCH_JOB_ID") == job_id:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def free_port() -> int:
    """A port nothing listens on now. Jobs that rendezvous on this host take one each:
    another checkout's suite may run the same job at the same moment."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def free_port_pair() -> int:
    """A port P such that nothing listens on P or P + 1 now, for a job whose node N serves
    on P + N. Taken below the kernel's range of ephemeral ports: a port from that range
    (what `free_port` gets) is free only of listeners, and any outgoing connection of
    this or another suite may take its neighbour before the job binds it."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(1000):
        port = random.randrange(10_000, low - 1)
        try:
            with socket.socket() as first, socket.socket() as second:
                first.bind(("127.0.0.1", port))
                second.bind(("127.0.0.1", port + 1))
        except OSError:
            continue
        return port
    raise RuntimeError("no two adjacent free ports below the ephemeral range")


def read_store(path: Path, *, immutable: bool = True) -> sqlite3.Connection:
    """A read-only look at a job store. `immutable`: the file alone, as it is on disk (not
    what a WAL beside it adds), leaving nothing beside it, not even a -wal or -shm: for
    the committed fixtures, and for stores that must stay untouched."""
    flag = "&immutable=1" if immutable else ""
    return sqlite3.connect(f"file:{quote(str(path))}?mode=ro{flag}", uri=True)


def schema_version(path: Path) -> int:
    """A store's `PRAGMA user_version`, read as `read_store` reads."""
    db = read_store(path)
    try:
        return db.execute("PRAGMA user_version").fetchone()[0]
    finally:
        db.close()


PROGRAMS = Path(__file__).resolve().parent / "programs"


def job_crashing_mid_checkpoint(write, ckpt: Path, section: str = "") -> Path:
    """A one-split job file whose program (programs/checkpointer.py) checkpoints into
    `ckpt` and dies while writing checkpoint 3; `section` is a backend's line."""
    return write(
        f"""
        launcher: none
        splits: 1
        command: [{sys.executable}, {PROGRAMS / "checkpointer.py"}]
        env: {{CKPT: {ckpt}, CRASH_AT: 3}}
        checkpoint: {{dir: {ckpt}}}
        {section}
        """
    )


def assert_retry_resumes_from_step_2(cli, run_id: str, ckpt: Path, **how) -> None:
    """`retry --failed` of that job's run: attempt 2 starts from checkpoint 2, the newest
    complete one, and finishes. `how`: the `cli` call's env and timeout."""
    retried = cli("retry", run_id, "--failed", "--json", **how)
    assert retried.rc == 0, retried.err
    second = retried.json()["splits"][0]["attempts"][1]
    log = cli("logs", second["id"], env=how.get("env")).out
    assert f"attempt=2 resume_from={ckpt / 'step_2'}" in log
    assert "done at step 5" in log


def plan_text(plan: dict, own_id: str) -> str:
    """A stored or dry-run plan as text, but for what each run draws anew: its job id
    and the master port picked free for it."""
    import json

    shown = {k: v for k, v in plan.items() if k not in ("id", "kind")}  # --json's naming
    text = json.dumps(shown, sort_keys=True).replace(own_id, "<job>")
    nodes = plan["payload"].get("nodes") if plan["backend"] == "local" else []
    for port in {node["env"]["MASTER_PORT"] for node in nodes}:
        text = text.replace(port, "<port>")
    return text


def assert_dry_run_is_the_plan_sent(cli, home: Path, path: Path, *args: str, env=None) -> str:
    """`run --dry-run` prints exactly the plan that `run` then sends and stores (but for
    the job's id and a free port). Returns the id of the submitted job (detached: the
    caller ends it)."""
    from anylaunch.store import Store

    dry = cli("run", str(path), "--dry-run", "--json", *args, env=env)
    assert dry.rc == 0, dry.err
    sent = cli("run", str(path), "--detach", "--json", *args, env=env)
    assert sent.rc == 0, sent.err
    job_id = sent.json()["id"]
    shown = dry.json()["plan"]
    assert plan_text(shown, shown["job_id"]) == plan_text(Store(home).get(job_id).plan, job_id)
    return job_id
