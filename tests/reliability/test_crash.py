"""Crash consistency: `anylaunch run` SIGKILLed at random points of a 20-split run's
submission, then the same command again (or `anylaunch retry RUN --failed`) finishes the
run with every split run exactly once and recorded exactly once, and a valid store.

The points are drawn per trial from "before anything is recorded", "right after the
splits are recorded", and "after k of 20 native ids are recorded" (some submits then in
flight), watched in the store itself, so each trial dies where it was meant to whatever
the machine's speed.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from reliability_helpers import (
    FIGURES,
    PY,
    cli_env,
    count_tracebacks,
    load_json,
    store_problems,
    wait_until,
)

from anylaunch.jobfile.spec import JobSpec
from anylaunch.launch.resolve import resolve
from anylaunch.state import State
from anylaunch.store import Store, new_id
from lepton_emulator.server import Server

SPLITS = 20
TRIALS = 10


def _job_file(tmp: Path, out: Path) -> Path:
    path = tmp / "job.yaml"
    path.write_text(
        "launcher: none\n"
        f"splits: {SPLITS}\n"
        f"command: [bash, -c, 'echo \"$ANYLAUNCH_JOB_ID\" >> {out}/$SPLIT_ID']\n"
    )
    return path


class Progress:
    """(jobs recorded, native ids recorded) in a store, read without disturbing writers."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self._conn: sqlite3.Connection | None = None

    def __call__(self) -> tuple[int, int]:
        try:
            if self._conn is None:
                if not self.db.exists():
                    return (0, 0)
                self._conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=1)
            return self._conn.execute("SELECT COUNT(*), COUNT(native_id) FROM jobs").fetchone()
        except sqlite3.OperationalError:
            return (0, 0)  # the schema is being created

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


def _run_killed(home: Path, job: Path, point: int, cwd: Path) -> tuple[int, int]:
    """Start `anylaunch run` and SIGKILL it at `point`: -1 = before recording (a random
    moment of start-up), k >= 0 = once k native ids of this run are recorded. Returns
    (jobs, native ids) it had recorded when it died."""
    progress = Progress(home / "jobs.db")
    rows0, natives0 = progress()
    proc = subprocess.Popen(
        [PY, "-m", "anylaunch", "run", str(job), "--json", "--no-preflight"],
        env=cli_env(home),
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=lambda: os.nice(10),  # the watcher must see each native id land
    )
    try:
        if point < 0:
            time.sleep(random.uniform(0.05, 0.3))
        else:

            def reached() -> bool:
                rows, natives = progress()
                return rows >= rows0 + SPLITS and natives >= natives0 + point

            wait_until(reached, timeout=60, what=f"{point} native ids", interval=0.002)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    rows, natives = progress()
    progress.close()
    return rows - rows0, natives - natives0


def test_sigkilled_run_is_finished_by_the_same_command_or_retry_exactly_once(
    home: Path, tmp_path: Path, spawns
) -> None:
    rng = random.Random(9)
    points = [-1, 0, *rng.sample(range(1, SPLITS), TRIALS - 2)]
    rng.shuffle(points)
    landed: list[str] = []
    trial = 0
    while points:
        point = points.pop()
        trial_dir = tmp_path / f"trial{len(landed)}"
        out = trial_dir / "out"
        out.mkdir(parents=True)
        job = _job_file(trial_dir, out)
        before = run_ids(home)
        rows, natives = _run_killed(home, job, point, trial_dir)
        landed.append(f"{point}->{rows}/{natives}")
        if natives == SPLITS:
            # Killed after the submission was complete (the watcher was late): not a
            # crash mid-submission. Draw again, a bounded number of times.
            assert len(landed) < 2 * TRIALS, f"kills kept landing late: {landed}"
            points.insert(0, rng.randrange(0, SPLITS))
            _wait_quiet(out)
            continue
        trial += 1
        new_runs = [r for r in run_ids(home) if r not in before]
        # Odd trials: `retry RUN --failed` (when the crash left a run to retry).
        if trial % 2 == 1 and new_runs:
            args = ["retry", new_runs[0], "--failed", "--json"]
        else:
            args = ["run", str(job), "--json", "--no-preflight"]
        done = subprocess.run(
            [PY, "-m", "anylaunch", *args],
            env=cli_env(home),
            cwd=trial_dir,
            capture_output=True,
            text=True,
            timeout=120,
        )
        count_tracebacks(done.stdout, done.stderr)
        assert done.returncode == 0, f"trial {trial} ({landed[-1]}, {args[0]}): {done.stderr}"
        result = load_json(done.stdout)
        assert result["state"] == "SUCCEEDED", result
        # Each split ran exactly once, and the job that ran is the split's only record.
        records = {s["split_id"]: s["attempts"] for s in result["splits"]}
        ran = {int(p.name): p.read_text().split() for p in out.iterdir()}
        duplicates = sum(len(ids) - 1 for ids in ran.values())
        lost = SPLITS - len(ran) + sum(len(a) != 1 for a in records.values())
        lost += sum(records[i][0]["id"] != ids[0] for i, ids in ran.items() if i in records)
        FIGURES["duplicates"] += duplicates
        FIGURES["lost"] += lost
        FIGURES["jobs submitted"] += sum(len(ids) for ids in ran.values())
        FIGURES["crash trials"] += 1
        assert (duplicates, lost) == (0, 0), f"trial {trial} ({landed[-1]}): {ran} {records}"
        assert sorted(records) == list(range(SPLITS))
    problems = store_problems(home / "jobs.db")
    assert problems == [], problems
    store = Store(home)
    assert [j.id for j in store.list(limit=None) if j.native_id is None] == []
    # Every trial's splits belong to one run: rerunning never started a second one.
    late = sum(1 for mark in landed if mark.endswith(f"/{SPLITS}"))
    assert len({j.run_id for j in store.list(limit=None)}) == TRIALS + late, landed
    print("kill points (target->jobs/native ids recorded):", " ".join(landed))


def _wait_quiet(out: Path) -> None:
    """Let a late-killed trial's splits finish, so they do not load the next trial."""
    wait_until(lambda: len(list(out.iterdir())) == SPLITS, timeout=60, what="splits to end")


def run_ids(home: Path) -> list[str]:
    if not (home / "jobs.db").exists():
        return []
    db = sqlite3.connect(home / "jobs.db")
    try:
        return [r[0] for r in db.execute("SELECT id FROM runs ORDER BY created_at")]
    except sqlite3.OperationalError:
        return []
    finally:
        db.close()


def _recorded_and_sent_but_not_noted(spec: JobSpec, backend: str, store: Store, n: int):
    """The state a crash right after the submit call leaves: every split recorded, the
    backend holding the job(s), no native id written."""
    from anylaunch.backends.base import ArraySubmission, get_backend
    from anylaunch.launch import splits

    impl = get_backend(backend)
    run_id = new_id()
    batch = splits.render(resolve(spec, impl), store, run_id, [(i, new_id()) for i in range(n)])
    store.add_run(run_id, None, batch.records)
    if isinstance(impl, ArraySubmission):
        impl.submit_array(batch.jobs[0].plan, {})
    else:
        for job in batch.jobs:
            impl.submit(job.plan, {})
    return run_id


def test_a_slurm_array_submitted_but_never_noted_is_found_by_its_comment_not_resubmitted(
    home: Path, devstack: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from anylaunch.backends.slurm import commands
    from anylaunch.launch import splits

    monkeypatch.setenv("SLURM_CONF", devstack["SLURM_CONF"])
    spec = JobSpec(command=["true"], launcher="none", slurm={}, splits=3)
    store = Store(home)
    run_id = _recorded_and_sent_but_not_noted(spec, "slurm", store, 3)
    sbatches = commands.CALLS["sbatch"]
    run = splits.resume(run_id, resolve(spec, "slurm"), store=store)
    assert commands.CALLS["sbatch"] == sbatches and run.submitted == []
    natives = sorted(j.record.native_id for j in run.jobs)
    base = natives[0].split("_")[0]
    assert natives == [f"{base}_{i}" for i in range(3)]
    assert {j.wait(timeout=60) for j in run.jobs} == {State.SUCCEEDED}
    FIGURES["crash trials"] += 1


def test_a_lepton_job_created_but_never_noted_is_found_by_its_name_not_created_again(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lepton_server: Server
) -> None:
    from anylaunch.launch import splits

    spec = JobSpec(
        command=["true"], launcher="none", image="python:3.11", splits=2,
        lepton={"resource_shape": "cpu.small"},
    )  # fmt: skip
    with lepton_server.open(state_dir=tmp_path / "emulator") as emu:
        for key, value in emu.env().items():
            monkeypatch.setenv(key, value)
        store = Store(home)
        run_id = _recorded_and_sent_but_not_noted(spec, "lepton", store, 2)
        run = splits.resume(run_id, resolve(spec, "lepton"), store=store)
        assert run.submitted == []
        assert len(emu.world.list("alive_and_archive")) == 2
        assert sorted(j.record.native_id for j in run.jobs) == sorted(
            j.id for j in emu.world.list("alive_and_archive")
        )
        assert {j.wait(timeout=60) for j in run.jobs} == {State.SUCCEEDED}
    FIGURES["crash trials"] += 1


DEAD_SUBMITTER = {"pid": 2**22 + 12345, "started": 0.0}  # above pid_max: never alive


def test_a_slurm_job_adopted_after_its_submitter_died_shows_what_slurm_says_from_the_first_ps(
    home: Path, devstack: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The submitter died between sbatch and noting the native id. The first `ps` adopts
    the job and shows Slurm's state (not the pre-recovery "not submitted"), and once it
    is CANCELLED no detail from before is left on it."""
    from anylaunch.backends.base import get_backend
    from anylaunch.store import JobRecord

    env = cli_env(home, SLURM_CONF=devstack["SLURM_CONF"])
    monkeypatch.setenv("SLURM_CONF", devstack["SLURM_CONF"])  # this process's sbatch, too
    store = Store(home)
    spec = JobSpec(command=["sleep", "300"], launcher="none", slurm={})
    impl = get_backend("slurm")
    job_id = new_id()
    ctx = impl.prepare(spec, job_id, str(store.jobs_dir(job_id)), store)
    plan = impl.plan(spec, ctx)
    store.add(
        JobRecord(
            id=job_id, name=plan.name, backend="slurm", state=State.PENDING,
            job_dir=str(store.jobs_dir(job_id)), spec=spec.redacted(),
            plan=plan.model_dump(mode="json"), meta={"submitter": DEAD_SUBMITTER},
        )
    )  # fmt: skip
    native, _ = impl.submit(plan, {})  # what the submitter did before it died
    FIGURES["crash trials"] += 1

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [PY, "-m", "anylaunch", *args], env=env, capture_output=True, text=True, timeout=120
        )
        assert count_tracebacks(done.stdout, done.stderr) == 0 and done.returncode == 0, done
        return done

    first = {j["id"]: j for j in load_json(cli("ps", "--json").stdout)}[job_id]
    assert first["native_id"] == native, first
    assert first["state"] in ("PENDING", "RUNNING") and "not submitted" not in str(first["detail"])
    cli("cancel", job_id)
    final = load_json(cli("status", job_id, "--json").stdout)
    assert final["state"] == "CANCELLED", final
    assert "not submitted" not in str(final["detail"]), final
    assert not any("not submitted" in str(e["detail"]) for e in store.events(job_id))
    assert store_problems(home / "jobs.db") == []
