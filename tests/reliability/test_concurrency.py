"""Concurrency: 8 processes submit, poll and cancel at once against one store — no
"database is locked" (or any other error) reaches a caller, and no update is lost: every
cancel asked ends CANCELLED, every other job SUCCEEDED, every job keeps its native id.

tests/test_store.py hammers the store's own methods; this drives the real API and local
backend, with cancels that race the submits of other processes.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import time
import traceback
from pathlib import Path

from reliability_helpers import FIGURES, PY, cli_env, count_tracebacks, store_problems, wait_until

from anylaunch.state import State
from anylaunch.store import Store
from lepton_emulator.server import Server

WORKERS = 8
JOBS_PER_WORKER = 3


def _worker(k: int, home: str, errors: multiprocessing.Queue) -> None:
    """Submit 3 jobs (the first one long), cancel the long job of worker k+1 as soon as
    it is recorded — maybe before its submit returned — and poll everything meanwhile."""
    os.environ["ANYLAUNCH_HOME"] = home
    from anylaunch import api
    from anylaunch.jobfile.spec import JobSpec

    try:
        store = Store()
        target = f"w{(k + 1) % WORKERS}-0"
        cancelled = False
        for i in range(JOBS_PER_WORKER):
            command = ["sleep", "25"] if i == 0 else ["true"]
            spec = JobSpec(name=f"w{k}-{i}", command=command, launcher="none")
            api.submit(spec, "local", store=store, check=False)
            api.jobs(store=store, limit=None)  # poll every job: transitions race here
            if not cancelled:
                found = [r for r in store.list(limit=None) if r.name == target]
                if found:
                    api.get(found[0].id, store=store).cancel()
                    cancelled = True
        deadline = time.monotonic() + 30
        while not cancelled and time.monotonic() < deadline:
            found = [r for r in store.list(limit=None) if r.name == target]
            if found:
                api.get(found[0].id, store=store).cancel()
                cancelled = True
            time.sleep(0.02)
        for _ in range(5):
            api.jobs(store=store, limit=None)
            time.sleep(0.1)
    except BaseException:
        errors.put(f"worker {k}: {traceback.format_exc()}")


def test_eight_processes_submitting_polling_and_cancelling_lose_no_update(
    home: Path, spawns
) -> None:
    Store(home).close()
    ctx = multiprocessing.get_context("spawn")
    errors = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(k, str(home), errors)) for k in range(WORKERS)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
    reported = []
    while not errors.empty():
        reported.append(errors.get())
    FIGURES["processes at once"] = max(FIGURES["processes at once"], WORKERS)
    FIGURES["tracebacks"] += len(reported)
    assert reported == [], "\n".join(reported)
    assert [p.exitcode for p in procs] == [0] * WORKERS

    store = Store(home)

    def settled() -> bool:
        from anylaunch import api

        return all(r.state.terminal for r in api.jobs(store=store, limit=None))

    wait_until(settled, timeout=40, what="every job to end")
    jobs = store.list(limit=None)
    FIGURES["jobs submitted"] += len(jobs)
    assert len(jobs) == WORKERS * JOBS_PER_WORKER
    want = {r.name: State.CANCELLED if r.name.endswith("-0") else State.SUCCEEDED for r in jobs}
    got = {r.name: r.state for r in jobs}
    lost = sum(got[name] is not state for name, state in want.items())
    FIGURES["lost"] += lost
    assert got == want
    assert all(r.native_id for r in jobs)
    assert store_problems(home / "jobs.db") == []


def test_a_cancel_that_arrives_while_the_submit_is_in_flight_is_not_lost(
    home: Path, tmp_path: Path, lepton_server: Server, spawns
) -> None:
    """The create call is slow (2 s): `cancel` finds the job recorded but without a native
    id to stop. The submitting process must stop it once the create returns."""
    job = tmp_path / "job.yaml"
    job.write_text(
        "image: python:3.11\nlauncher: none\ncommand: [sleep, '60']\n"
        "lepton: {resource_shape: cpu.small}\n"
    )
    with lepton_server.open(state_dir=tmp_path / "emulator") as emu:
        emu.add_fault(kind="slow", route="POST /jobs", delay_s=2.0, count=1)
        env = cli_env(home, **emu.env())
        submit = subprocess.Popen(
            [PY, "-m", "anylaunch", "run", str(job), "--detach", "--json", "--no-preflight"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        db = home / "jobs.db"
        job_id = wait_until(
            lambda: db.exists() and [r.id for r in Store(home).list(limit=None)],
            timeout=30,
            what="the job to be recorded",
        )[0]
        assert Store(home).get(job_id).native_id is None  # the create is still in flight
        cancel = subprocess.run(
            [PY, "-m", "anylaunch", "cancel", job_id, "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        out, err = submit.communicate(timeout=60)
        count_tracebacks(cancel.stdout, cancel.stderr, out, err)
        assert cancel.returncode == 0, cancel.stderr
        assert submit.returncode == 0, err

        def final() -> State | None:
            status = subprocess.run(
                [PY, "-m", "anylaunch", "status", job_id, "--json"],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            state = State(status.stdout and __import__("json").loads(status.stdout)["state"])
            return state if state.terminal else None

        state = wait_until(final, timeout=30, what="the job to end", interval=0.5)
        FIGURES["lost"] += state is not State.CANCELLED
        assert state is State.CANCELLED
        running = [j for j in emu.world.list("alive_only") if j.state == "Running"]
        assert running == []
