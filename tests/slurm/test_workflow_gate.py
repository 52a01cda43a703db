"""Which Slurm jobs a step waits on, and when it must not be submitted (no cluster)."""

from __future__ import annotations

import pytest

from anylaunch.backends.base import ChainStep
from anylaunch.backends.slurm import chain
from anylaunch.errors import ConfigError, UsageError
from anylaunch.jobfile.spec import JobSpec
from anylaunch.state import State
from anylaunch.store import JobRecord

SPEC = JobSpec.model_validate({"command": ["true"]})


def job(jid, state, native=None, split=None, array=None, at=0.0):
    meta = {"array_job_id": array} if array else {}
    return JobRecord(
        id=jid, name=jid, backend="slurm", state=state, job_dir="/x", native_id=native,
        split_id=split, meta=meta, created_at=at,
    )  # fmt: skip


def step(sid, needs=()):
    return ChainStep(sid, SPEC, f"r.{sid}", tuple(needs))


def test_a_step_waits_on_a_live_single_job_by_its_id():
    records = {"a": [job("j1", State.RUNNING, "41")]}
    assert chain.gate(["a"], records) == chain.Gate(after=("41",))


def test_a_step_after_a_split_step_waits_on_the_array_id_once():
    tasks = [job(f"j{i}", State.PENDING, f"50_{i}", split=i, array="50") for i in range(4)]
    assert chain.gate(["a"], {"a": tasks}).after == ("50",)


def test_after_a_retried_task_the_step_waits_on_tasks_not_on_the_old_array():
    # split 1 failed in array 50 and runs again in array 60; split 0 still runs in 50:
    # afterok on 50 would fail for split 1's old attempt.
    tasks = [
        job("j0", State.RUNNING, "50_0", split=0, array="50"),
        job("j1", State.FAILED, "50_1", split=1, array="50"),
        job("k1", State.PENDING, "60_1", split=1, array="60", at=1.0),
    ]
    assert chain.gate(["a"], {"a": tasks}).after == ("50_0", "60")


def test_a_succeeded_step_adds_no_dependency():
    # slurmctld may have forgotten it: nothing to wait for
    records = {"a": [job("j1", State.SUCCEEDED, "41")], "c": [job("j2", State.PENDING, "42")]}
    assert chain.gate(["a", "c"], records).after == ("42",)


@pytest.mark.parametrize("bad", [State.FAILED, State.CANCELLED, State.TIMEOUT])
def test_a_failed_split_blocks_the_step_even_while_other_splits_run(bad):
    # afterok on the live ones only would let the step run after a failure
    tasks = [
        job("j0", State.RUNNING, "50_0", split=0, array="50"),
        job("j1", bad, "50_1", split=1, array="50"),
    ]
    g = chain.gate(["a"], {"a": tasks})
    assert g.blocked and g.blocked.startswith("needs a, which") and not g.after


def test_a_step_waits_when_a_needed_step_has_no_slurm_id_yet():
    records = {"a": [job("j1", State.UNKNOWN)]}
    assert chain.gate(["a"], records).waiting
    assert chain.gate(["a"], {"a": []}).waiting


def test_dependency_is_native_and_kills_the_step_when_it_can_never_be_met():
    spec = chain.with_dependency(SPEC, ["41", "50"])
    assert spec.slurm is not None
    assert spec.slurm.dependency == "afterok:41:50"
    assert spec.slurm.sbatch_lines[-1] == "--kill-on-invalid-dep=yes"
    assert chain.with_dependency(SPEC, []) is SPEC


def test_the_jobs_own_dependency_is_kept_and_an_any_of_one_refused():
    own = JobSpec.model_validate({"command": ["true"], "slurm": {"dependency": "afterany:7"}})
    assert chain.with_dependency(own, ["41"]).slurm.dependency == "afterok:41,afterany:7"
    either = JobSpec.model_validate(
        {"command": ["true"], "slurm": {"dependency": "afterok:7?afterok:8"}}
    )
    with pytest.raises(ConfigError, match=r"slurm\.dependency"):
        chain.with_dependency(either, ["41"])


def test_order_puts_needs_first_and_refuses_cycles_and_unknown_needs():
    got = chain.order([step("c", ["b"]), step("a"), step("b", ["a"])])
    assert [s.id for s in got] == ["a", "b", "c"]
    with pytest.raises(UsageError, match="cycle"):
        chain.order([step("a", ["b"]), step("b", ["a"])])
    with pytest.raises(UsageError, match="'x'"):
        chain.order([step("a", ["x"])])


def test_step_state_is_its_newest_attempts():
    first = job("j1", State.FAILED, "50_1", split=1, array="50")
    again = job("k1", State.SUCCEEDED, "60_1", split=1, array="60", at=1.0)
    other = job("j0", State.SUCCEEDED, "50_0", split=0, array="50")
    assert chain.state_of([first, other]) is State.FAILED
    assert chain.state_of([first, other, again]) is State.SUCCEEDED
    assert chain.state_of([]) is None


def test_dry_run_of_a_slurm_only_workflow_shows_each_steps_native_dependency(cli_inproc, write):
    path = write(
        """
        launcher: none
        slurm: {}
        steps:
          a:
            command: [bash, -c, "echo a"]
          b:
            needs: [a]
            splits: 2
            command: [bash, -c, "echo b"]
          c:
            needs: [b]
            command: [bash, -c, "echo c"]
        """,
        "wf.yaml",
    )
    shown = cli_inproc("run", str(path), "--dry-run")
    assert shown.rc == 0, shown.err
    assert "submitted at once, each waiting on the steps it needs" in shown.out
    a, b, c = shown.out.split("== step ")[1:]
    assert "--dependency" not in a and "--kill-on-invalid-dep" not in a
    assert "#SBATCH --dependency='afterok:<a>'" in b
    assert "#SBATCH --dependency='afterok:<b>'" in c
    assert "#SBATCH --kill-on-invalid-dep=yes" in c


def test_a_step_whose_need_is_left_out_by_from_waits_on_nothing(cli_inproc, write):
    path = write(
        """
        launcher: none
        slurm: {}
        steps:
          a:
            command: [bash, -c, "echo a"]
          b:
            needs: [a]
            command: [bash, -c, "echo b"]
          c:
            needs: [b]
            command: [bash, -c, "echo c"]
        """,
        "wf.yaml",
    )
    shown = cli_inproc("run", str(path), "--from", "b", "--dry-run")
    assert shown.rc == 0, shown.err
    _, b, c = shown.out.split("== step ")[1:]
    assert "--dependency" not in b  # a counts as done: its outputs are read where they are
    assert "#SBATCH --dependency='afterok:<b>'" in c
