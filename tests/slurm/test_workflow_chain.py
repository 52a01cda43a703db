"""A graph of steps handed to the devstack Slurm cluster at once, with native
`--dependency=afterok`: the submitter may die, a failure cancels what comes after it,
and a retry reruns only what failed and the steps after it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from anylaunch.backends.base import ChainStep
from anylaunch.backends.slurm import chain, commands
from anylaunch.jobfile import loader
from anylaunch.state import State
from anylaunch.store import JobRecord, Store

ROOT = Path(__file__).resolve().parents[2]


# Every test here submits to the shared cluster: its jobs are cancelled at the end.
pytestmark = pytest.mark.usefixtures("leave_no_job_behind")


def step(write, tmp_path: Path, sid: str, body: str, needs=(), splits: int | None = None):
    """A step whose job runs `body` in bash, in a folder all steps share."""
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    script = f"cd {out}; {body}"
    text = f"name: {sid}\ncommand: [bash, -c, {json.dumps(script)}]\nlauncher: none\n"
    if splits is not None:
        text += f"splits: {splits}\n"
    path = write(text, f"{sid}.yaml")
    spec = loader.load(path, environ=dict(os.environ))
    return ChainStep(sid, spec, run_id=f"{tmp_path.name}.{sid}", needs=tuple(needs))


def wait_for(steps, store, timeout=240.0):
    """Poll until every step has ended (or is held back for good)."""
    deadline = time.monotonic() + timeout
    while True:
        seen = {s.id: s for s in chain.status(steps, store)}
        if all(s.state.terminal for s in seen.values()):
            return seen
        if time.monotonic() > deadline:
            raise AssertionError(f"the graph did not end: {[s.to_json() for s in seen.values()]}")
        time.sleep(0.5)


def scontrol(native_id: str) -> str:
    return commands.run(["scontrol", "show", "job", native_id]).stdout


def test_three_step_chain_is_one_submission_and_finishes_after_the_submitter_is_killed(
    write, tmp_path, home
):
    steps = [
        step(write, tmp_path, "a", "while [ ! -f go ]; do sleep 0.2; done; touch a.done"),
        step(write, tmp_path, "b", "test -f a.done || exit 7; touch b.done", needs=["a"]),
        step(write, tmp_path, "c", "test -f b.done || exit 7; touch c.done", needs=["b"]),
    ]
    files = {s.id: s.spec.source for s in steps}
    submitter = subprocess.Popen(
        [sys.executable, "-c", SUBMITTER, json.dumps(files), tmp_path.name],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "ANYLAUNCH_HOME": str(home)},
        cwd=ROOT,
    )
    assert submitter.stdout is not None
    said = json.loads(submitter.stdout.readline())
    submitter.send_signal(signal.SIGKILL)  # the submitting machine goes away
    submitter.wait()
    assert said["sbatch_calls"] == 3 and said["held"] == {}

    store = Store(home)
    ids = {s.id: store.list(run_id=s.run_id)[0].native_id for s in steps}
    # While a waits for its go file, b and c wait in Slurm's queue on native dependencies.
    assert re.search(rf"Dependency=afterok:{ids['a']}\(unfulfilled\)", scontrol(ids["b"]))
    assert re.search(rf"Dependency=afterok:{ids['b']}\(unfulfilled\)", scontrol(ids["c"]))
    assert "Reason=Dependency" in scontrol(ids["c"])
    (tmp_path / "out" / "go").touch()

    final = wait_for(steps, store)
    assert {sid: s.state for sid, s in final.items()} == dict.fromkeys("abc", State.SUCCEEDED)
    assert (tmp_path / "out" / "c.done").exists()
    assert all(len(store.list(run_id=s.run_id)) == 1 for s in steps)  # nothing sent twice


# The submitting process: load the steps, submit, say so, then linger until killed.
SUBMITTER = """
import json, sys, time
from anylaunch.backends.base import ChainStep
from anylaunch.backends.slurm import chain, commands
from anylaunch.jobfile import loader
files, prefix = json.loads(sys.argv[1]), sys.argv[2]
needs = {"a": (), "b": ("a",), "c": ("b",)}
steps = [ChainStep(s, loader.load(f), f"{prefix}.{s}", needs[s]) for s, f in files.items()]
held = chain.submit(steps)
print(json.dumps({"sbatch_calls": commands.CALLS["sbatch"], "held": {k: str(v) for k, v in held.items()}}), flush=True)
time.sleep(600)
"""


def test_failed_step_cancels_the_steps_after_it_and_retry_reruns_them(write, tmp_path, home):
    fail_once = '[ "$ANYLAUNCH_ATTEMPT" = 1 ] && exit 3; touch a.done'
    steps = [
        step(write, tmp_path, "a", f"echo a >> ran; {fail_once}"),
        step(write, tmp_path, "b", "echo b >> ran", needs=["a"]),
        step(write, tmp_path, "c", "echo c >> ran", needs=["b"]),
    ]
    store = Store(home)
    assert chain.submit(steps, store) == {}
    final = wait_for(steps, store)
    assert final["a"].state is State.FAILED and "exit 3" in (final["a"].detail or "")
    assert final["b"].state is State.CANCELLED
    assert final["b"].detail == "never ran: needs a, which failed (Slurm cancelled it)"
    assert final["c"].state is State.CANCELLED
    assert final["c"].detail == "never ran: needs b, which was cancelled (Slurm cancelled it)"
    assert (tmp_path / "out" / "ran").read_text().split() == ["a"]

    assert chain.retry_failed(steps, store) == {"a": [], "b": [], "c": []}
    final = wait_for(steps, store)
    assert {sid: s.state for sid, s in final.items()} == dict.fromkeys("abc", State.SUCCEEDED)
    assert (tmp_path / "out" / "ran").read_text().split() == ["a", "a", "b", "c"]


def test_split_step_is_one_array_and_retry_reruns_only_its_failed_task_and_what_follows(
    write, tmp_path, home
):
    steps = [
        step(write, tmp_path, "prep", "while [ ! -f go ]; do sleep 0.2; done; echo prep >> ran"),
        step(
            write,
            tmp_path,
            "eval",
            'echo "eval$SPLIT_ID" >> ran; [ "$SPLIT_ID$ANYLAUNCH_ATTEMPT" != 21 ]',
            needs=["prep"],
            splits=4,
        ),
        step(write, tmp_path, "export", "echo export >> ran", needs=["eval"]),
    ]
    store = Store(home)
    commands.CALLS.clear()
    chain.submit(steps, store)
    assert commands.CALLS["sbatch"] == 3  # the four splits are one array
    evals = store.list(run_id=steps[1].run_id)
    (array,) = {r.meta["array_job_id"] for r in evals}
    assert sorted(r.native_id for r in evals) == [f"{array}_{i}" for i in range(4)]
    prep_id = store.list(run_id=steps[0].run_id)[0].native_id
    export_id = store.list(run_id=steps[2].run_id)[0].native_id
    # While prep waits for its go file: the array waits on prep, export on the whole array.
    assert f"Dependency=afterok:{prep_id}(unfulfilled)" in scontrol(array)
    assert f"Dependency=afterok:{array}_*(unfulfilled)" in scontrol(export_id)
    (tmp_path / "out" / "go").touch()

    final = wait_for(steps, store)
    assert final["prep"].state is State.SUCCEEDED
    assert final["eval"].state is State.FAILED and "split 2 failed" in (final["eval"].detail or "")
    assert final["export"].state is State.CANCELLED

    assert chain.retry_failed(steps, store) == {"eval": [2], "export": []}
    retried = max(store.list(run_id=steps[1].run_id), key=lambda r: r.created_at)
    plan = store.get(retried.id).plan
    assert "#SBATCH --array=2\n" in plan["payload"]["script"]
    assert "--dependency" not in plan["payload"]["script"]  # prep succeeded: nothing to wait on
    export_plan = store.get(
        max(store.list(run_id=steps[2].run_id), key=lambda r: r.created_at).id
    ).plan
    assert (
        f"--dependency=afterok:{retried.meta['array_job_id']}" in export_plan["payload"]["script"]
    )

    final = wait_for(steps, store)
    assert {sid: s.state for sid, s in final.items()} == dict.fromkeys(final, State.SUCCEEDED)
    ran = (tmp_path / "out" / "ran").read_text().split()
    assert sorted(ran) == sorted(["prep", "eval0", "eval1", "eval2", "eval3", "eval2", "export"])


def test_submit_again_after_a_crash_between_steps_starts_only_the_missing_ones(
    write, tmp_path, home
):
    steps = [
        step(write, tmp_path, "a", "while [ ! -f go ]; do sleep 0.2; done"),
        step(write, tmp_path, "b", "true", needs=["a"]),
        step(write, tmp_path, "c", "true", needs=["b"]),
    ]
    store = Store(home)
    chain.submit(steps[:1], store)  # the submitter died after the first step
    assert chain.submit(steps, store) == {}
    assert [len(store.list(run_id=s.run_id)) for s in steps] == [1, 1, 1]
    a_id = store.list(run_id=steps[0].run_id)[0].native_id
    b_id = store.list(run_id=steps[1].run_id)[0].native_id
    assert f"Dependency=afterok:{a_id}(unfulfilled)" in scontrol(b_id)
    assert chain.submit(steps, store) == {}  # a third time: nothing new
    assert [len(store.list(run_id=s.run_id)) for s in steps] == [1, 1, 1]
    (tmp_path / "out" / "go").touch()
    final = wait_for(steps, store)
    assert {sid: s.state for sid, s in final.items()} == dict.fromkeys("abc", State.SUCCEEDED)


# A submitter that dies at its sbatch of one step: just after Slurm took it (its id never
# recorded), or just before (recorded, never sent).
CRASHER = """
import json, os, signal, sys
from anylaunch.backends.base import ChainStep
from anylaunch.backends.slurm import chain, commands
from anylaunch.jobfile import loader
files, prefix, victim, when = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
needs = {"a": (), "b": ("a",), "c": ("b",)}
real = commands.run
def run(argv, **kw):
    hit = argv[0] == "sbatch" and f"--job-name={victim}" in open(argv[-1]).read()
    if hit and when == "before":
        os.kill(os.getpid(), signal.SIGKILL)
    proc = real(argv, **kw)
    if hit:
        os.kill(os.getpid(), signal.SIGKILL)
    return proc
commands.run = run
steps = [ChainStep(s, loader.load(f), f"{prefix}.{s}", needs[s]) for s, f in files.items()]
chain.submit(steps)
"""


@pytest.mark.parametrize("when", ["after", "before"])
def test_submitter_killed_at_a_steps_sbatch_leaves_no_step_submitted_twice(
    write, tmp_path, home, when
):
    steps = [
        step(write, tmp_path, "a", "while [ ! -f go ]; do sleep 0.2; done; echo a >> ran"),
        step(write, tmp_path, "b", "echo b >> ran", needs=["a"]),
        step(write, tmp_path, "c", "echo c >> ran", needs=["b"]),
    ]
    files = {s.id: s.spec.source for s in steps}
    crashed = subprocess.run(
        [sys.executable, "-c", CRASHER, json.dumps(files), tmp_path.name, "b", when],
        env={**os.environ, "ANYLAUNCH_HOME": str(home)},
        cwd=ROOT,
        check=False,
    )
    assert crashed.returncode == -signal.SIGKILL
    store = Store(home)
    (b_job,) = store.list(run_id=steps[1].run_id)
    assert b_job.native_id is None  # recorded, its Slurm id never written down
    assert store.list(run_id=steps[2].run_id) == []  # c never started

    assert chain.submit(steps, store) == {}  # the same submission again
    (b_job,) = store.list(run_id=steps[1].run_id)
    queue = commands.run(["squeue", "--noheader", "--states=all", "--format=%A|%k"]).stdout
    b_in_slurm = [line.split("|")[0] for line in queue.split() if line.endswith(f":{b_job.id}")]
    assert b_in_slurm == [b_job.native_id]  # one job for b in Slurm, the one recorded
    (c_job,) = store.list(run_id=steps[2].run_id)
    assert f"Dependency=afterok:{b_job.native_id}(unfulfilled)" in scontrol(c_job.native_id)
    (tmp_path / "out" / "go").touch()
    final = wait_for(steps, store)
    assert {sid: s.state for sid, s in final.items()} == dict.fromkeys("abc", State.SUCCEEDED)
    assert (tmp_path / "out" / "ran").read_text().split() == ["a", "b", "c"]


def test_no_dependency_is_put_on_a_job_slurm_no_longer_lists(write, tmp_path, home):
    # slurmctld lifts a dependency on a job it has forgotten, whatever its outcome: the
    # step must wait for that job's outcome to be looked up, not be submitted.
    steps = [
        step(write, tmp_path, "a", "true"),
        step(write, tmp_path, "b", "echo b >> ran", needs=["a"]),
    ]
    store = Store(home)
    gone = store.add(
        JobRecord(
            id="gonejob1", name="a", backend="slurm", state=State.PENDING, job_dir=str(tmp_path),
            run_id=steps[0].run_id,
        )
    )  # fmt: skip
    store.set_native(gone.id, "999999", {"requeue": True, "array": False})
    store.transition(gone.id, State.RUNNING)
    held = chain.submit(steps, store)
    assert held["b"].waiting == "Slurm no longer lists job 999999: its outcome is looked up"
    assert store.list(run_id=steps[1].run_id) == []
