"""squeue and sacct output recorded on a real Slurm cluster (22.05, the devstack), read by
the pure parsers and turned into observations as a poll does: no cluster needed.

The recordings (tests/slurm/recorded/*.json, made by record.py there) hold the exact
command lines; the first test fails when the code's command lines change, which is
the signal to record again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from anylaunch.backends.slurm import parse
from anylaunch.backends.slurm.backend import observe
from anylaunch.state import State
from anylaunch.store import JobRecord

RECORDED = Path(__file__).parent / "recorded"


def recorded(case: str) -> dict[str, Any]:
    return json.loads((RECORDED / f"{case}.json").read_text())


def queue(case: str) -> dict[str, parse.Row]:
    return parse.squeue_rows(recorded(case)["squeue"]["stdout"])


def acct(case: str) -> dict[str, parse.Row]:
    return parse.sacct_rows(recorded(case)["sacct"]["stdout"])


def job(native_id: str, *, requeue: bool = True) -> JobRecord:
    return JobRecord(
        id=f"j{native_id}", name="t", backend="slurm", state=State.PENDING, job_dir="/nonexistent",
        native_id=native_id, meta={"requeue": requeue},
    )  # fmt: skip


def seen(native_id: str, q: dict[str, parse.Row], a: dict[str, parse.Row], **kw: Any):
    return observe([job(native_id, **kw)], q, a).get(f"j{native_id}")


@pytest.mark.parametrize("case", sorted(p.stem for p in RECORDED.glob("*.json")))
def test_recordings_were_made_with_the_command_lines_a_poll_runs(case: str) -> None:
    record = recorded(case)
    if "squeue" in record and case != "comments":
        assert record["squeue"]["argv"] == parse.squeue_argv(record["ids"])
    if "sacct" in record:
        assert record["sacct"]["argv"] == parse.sacct_argv(record["ids"])
    if case == "comments":
        assert record["squeue"]["argv"] == parse.comment_argv()


def test_pending_jobs_read_as_pending_with_slurms_reason() -> None:
    q = queue("pending")
    held, later = recorded("pending")["ids"]
    assert seen(held, q, {}).state is State.PENDING
    assert seen(held, q, {}).detail == "pending: JobHeldUser"
    assert seen(later, q, {}).detail == "pending: BeginTime"
    # Accounting has no line for a job that never started: it says nothing, not FAILED.
    assert acct("pending") == {}


def test_a_running_job_reads_running_from_squeue_though_accounting_lags() -> None:
    (native,) = recorded("running")["ids"]
    assert acct("running")[native].state == "PENDING"  # what slurmdbd had then
    assert seen(native, queue("running"), acct("running")).state is State.RUNNING


@pytest.mark.parametrize("source", ["squeue", "sacct"])
def test_ended_jobs_read_the_same_from_squeue_and_from_accounting(source: str) -> None:
    ok, bad, killed = recorded("ended")["ids"]
    rows = queue("ended") if source == "squeue" else acct("ended_sacct_only")
    q, a = (rows, {}) if source == "squeue" else ({}, rows)
    assert (seen(ok, q, a).state, seen(ok, q, a).exit_code) == (State.SUCCEEDED, 0)
    assert (seen(bad, q, a).state, seen(bad, q, a).exit_code) == (State.FAILED, 3)
    # Killed by SIGKILL: squeue's wait status 9 and sacct's 0:9 are both 128 + 9.
    assert (seen(killed, q, a).state, seen(killed, q, a).exit_code) == (State.FAILED, 137)


def test_cancelled_jobs_read_cancelled_whether_they_ran_or_not() -> None:
    for case in ("cancelled_pending", "cancelled_running"):
        for native in recorded(case)["ids"]:
            assert seen(native, queue(case), {}).state is State.CANCELLED
            assert seen(native, {}, acct(case)).state is State.CANCELLED  # `CANCELLED by 0`


def test_a_job_killed_at_its_time_limit_reads_timeout() -> None:
    (native,) = recorded("timeout")["ids"]
    for q, a in ((queue("timeout"), {}), ({}, acct("timeout"))):
        observed = seen(native, q, a)
        assert observed.state is State.TIMEOUT
        assert "time limit" in (observed.detail or "")


def test_every_task_of_a_throttled_array_is_its_own_row_under_the_id_sbatch_gave_it() -> None:
    ids = recorded("array_throttled")["ids"]
    q = queue("array_throttled")
    assert sorted(q) == sorted(ids)
    states = {native: seen(native, q, {}).state for native in ids}
    assert sorted(states.values()) == sorted([State.RUNNING] * 2 + [State.PENDING] * 3)
    waiting = [n for n in ids if states[n] is State.PENDING]
    assert {seen(n, q, {}).detail for n in waiting} == {"pending: JobArrayTaskLimit"}


def test_accountings_one_line_for_an_arrays_unstarted_tasks_covers_each_task() -> None:
    a = acct("array_by_base_id")
    assert recorded("array_by_base_id")["sacct"]["stdout"].startswith("448_[1-5%2]|PENDING")
    assert {f"448_{i}" for i in range(1, 6)} <= set(a)
    assert seen("448_4", {}, a).state is State.PENDING


def test_an_array_task_that_failed_reads_failed_and_its_siblings_succeeded() -> None:
    ids = recorded("array_ended")["ids"]
    for q, a in ((queue("array_ended"), {}), ({}, acct("array_ended"))):
        ends = {n: (seen(n, q, a).state, seen(n, q, a).exit_code) for n in ids}
        assert ends.pop("448_3") == (State.FAILED, 1)
        assert set(ends.values()) == {(State.SUCCEEDED, 0)}


def test_a_requeued_job_is_live_again_not_finished() -> None:
    (native,) = recorded("requeued")["ids"]
    assert seen(native, queue("requeued"), {}).state is State.PENDING
    from_acct = seen(native, {}, acct("requeued"))
    assert acct("requeued")[native].state == "REQUEUED"
    assert from_acct.state is State.PENDING and from_acct.detail == "requeued by Slurm"


def test_a_heterogeneous_job_reads_as_its_components_together() -> None:
    (native,) = recorded("hetjob_running")["ids"]
    assert {f"{native}+0", f"{native}+1"} <= set(acct("hetjob_running"))
    assert seen(native, {}, acct("hetjob_running")).state is State.RUNNING
    assert seen(native, queue("hetjob_running"), {}).state is State.RUNNING
    assert seen(native, {}, acct("hetjob_ended")).state is State.SUCCEEDED


def test_a_heterogeneous_job_with_one_failed_component_reads_failed() -> None:
    rows = parse.sacct_rows(
        "7+0|COMPLETED|0:0\n7+1|FAILED|2:0\n8+0|RUNNING|0:0\n8+1|COMPLETED|0:0\n"
    )
    assert (rows["7"].state, rows["7"].exit_code) == ("FAILED", 2)
    assert rows["8"].state == "RUNNING"


def test_a_job_slurm_never_had_is_not_seen_at_all() -> None:
    record = recorded("unknown_id")
    assert record["squeue"]["returncode"] == 1
    assert parse.all_forgotten(record["squeue"]["stderr"])
    assert acct("unknown_id") == {}
    (native,) = record["ids"]
    assert seen(native, {}, {}) is None  # the stored state stands; nothing is guessed


def test_jobs_are_found_by_their_comment_and_arrays_by_their_array_id() -> None:
    record = recorded("comments")
    single, array, _ = record["ids"]
    found = parse.comment_rows(record["squeue"]["stdout"])
    assert found["rec00001"] == (single, False)
    assert found["rec00002"] == (array, True)
    assert all(not key.startswith("someone") for key in found)


def test_sbatch_parsable_output_gives_the_job_id_after_warnings() -> None:
    assert parse.job_id("sbatch: warning: something\n1234;devstack\n") == "1234"
    assert parse.job_id("55\n") == "55"
