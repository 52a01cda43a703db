"""The in-job reading of a failed attempt (node/runtime/triage.py) against anylaunch's
diagnosis: the rule table it carries is the diagnosis's own, and on every message of the
corpus it names the diagnosis's class or nothing, so a job never continues itself after
a failure the submitting side would not retry."""

from __future__ import annotations

from pathlib import Path

import pytest

from anylaunch.node.runtime import rules_table, triage
from anylaunch.observe.diagnose import export, policy, score

CORPUS = Path(__file__).resolve().parents[1] / "diagnose" / "corpus"
CASES = score.load(CORPUS)
# Classes the diagnosis reads from a whole log (the work was over before the failure):
# the in-job reading, one line at a time, names the failing line's own class instead.
WHOLE_LOG = {"TEARDOWN_FAILED"}


def test_the_table_in_the_runtime_is_the_one_the_diagnosis_writes():
    written = Path(rules_table.__file__).read_text(encoding="utf-8")
    assert written == export.source(), (
        "node/runtime/rules_table.py is out of date: run"
        " python -m anylaunch.observe.diagnose.export src/anylaunch/node/runtime/rules_table.py"
    )


def test_on_the_whole_corpus_it_names_the_diagnosis_class_or_nothing():
    named = 0
    for case in CASES:
        found = triage.classify([(None, case.text)])
        if found is None:
            continue
        named += 1
        engine = case.run().code
        if engine in WHOLE_LOG and found.code != engine:
            # never a class a policy without `on:` retries, so the job ends and the
            # submitting side's diagnosis decides
            assert found.code not in policy.DEFAULT, (case.id, found.code, engine)
            continue
        assert found.code == engine, (case.id, found.code, engine, found.text)
    assert named >= 0.9 * len(CASES)


def test_it_pins_a_failure_on_the_node_where_the_diagnosis_does():
    pinned = 0
    for case in CASES:
        found = triage.classify([(None, case.text)])
        diagnosis = case.run().to_json()
        if found is None or not found.blames or found.code != diagnosis["code"]:
            continue
        pinned += 1
        hosts = [f"h{i}" for i in range(8)]
        assert policy.blamed_node(diagnosis, hosts) == (
            hosts[found.node] if found.node is not None else None
        ), case.id
    assert pinned >= 20


@pytest.mark.parametrize(
    ("text", "code", "node"),
    [
        # NCCL's watchdog on rank 0, as torch prints it (ProcessGroupNCCL.cpp)
        (
            "[rank0]:[E1218 20:27:21.426415540 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog"
            " caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE,"
            " NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600081 milliseconds before"
            " timing out.",
            "NCCL_TIMEOUT",
            None,
        ),
        # the driver's Xid 79 on node 1, then CUDA's error in the program
        (
            "[node 1] NVRM: Xid (PCI:0000:3b:00): 79, pid=2114, name=python, GPU has fallen"
            " off the bus.\n[node 1] RuntimeError: CUDA error: unspecified launch failure",
            "HARDWARE_GPU",
            1,
        ),
        # the program's own exception beats the timeouts it causes on the other ranks
        (
            "ValueError: the learning rate schedule needs warmup_steps < total_steps\n"
            "[rank1]:[E1218 20:27:21.426415540 ProcessGroupNCCL.cpp:629] [Rank 1] Watchdog"
            " caught collective operation timeout",
            "USER_ERROR",
            None,
        ),
    ],
)
def test_it_reads_real_failures(text, code, node):
    found = triage.classify([(None, text)])
    assert found is not None and (found.code, found.node) == (code, node)


def _args(job_dir: Path, marks: str = "") -> list[str]:
    on = ",".join(sorted(policy.DEFAULT))
    return [
        "triage", "--job-dir", str(job_dir), "--slurm-job-id", "1", "--attempt", "1",
        "--most", "2", "--rc", "1", "--on", on, "--nodes", "n1", "--marks", marks,
    ]  # fmt: skip


def test_a_program_error_ends_the_job_without_a_requeue(tmp_path, capsys):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "node-0.log").write_text(
        'Traceback (most recent call last):\n  File "train.py", line 3\n'
        "ValueError: the learning rate schedule needs warmup_steps < total_steps\n"
    )
    assert triage.main(_args(tmp_path)) == 1
    assert "USER_ERROR is not retried" in capsys.readouterr().out
    assert not (tmp_path / "attempts.jsonl").exists()


def test_only_this_attempts_lines_are_read(tmp_path, capsys):
    """An earlier attempt's Xid, before the marks, is not this attempt's failure."""
    logs = tmp_path / "logs"
    logs.mkdir()
    earlier = "NVRM: Xid (PCI:0000:3b:00): 79, pid=2114, name=python, GPU has fallen off the bus.\n"
    (logs / "node-0.log").write_text(earlier + "exit 1\n")
    marks = triage.marks(str(logs))
    assert marks == f"0:{len(earlier) + 7}"
    assert triage.main(_args(tmp_path, marks)) == 1
    assert "no line names its cause outright" in capsys.readouterr().out


@pytest.mark.parametrize("attempt", [1, 2, 3, 9])
def test_its_backoff_is_the_policy_s(attempt):
    rule = {"backoff": 30, "max_backoff": 600}
    assert triage.backoff(30, 600, attempt) == policy.backoff(rule, attempt)


WRAPPED = (
    "RuntimeError: DataLoader worker (pid 47) is killed by signal: Bus\n"
    "error. It is possible that dataloader's workers are out of shared\n"
    "memory. Please try to raise your shared memory limit.\n"
)


def test_a_message_a_terminal_wrapped_is_read_whole_as_the_diagnosis_reads_it():
    found = triage.classify([(0, WRAPPED)])
    assert found is not None and found.code == "SHM"
    # a next line that opens a record of its own is not a continuation
    assert (
        triage.classify(
            [(0, "enroot start cuda\nsed: couldn't close stdout: No space left on device\n")]
        ).code
        == "STORAGE"
    )


def test_a_store_lost_after_the_program_said_its_work_was_done_is_not_retried_in_the_job():
    lost = "[c10d] recvValue failed on SocketImpl(fd=30): failed to recv, got 0 bytes\n"
    assert triage.classify([(0, lost)]).code == "RDZV_FAILED"
    done = "step 100 loss 0.1\ntraining finished after 100 steps\n" + lost
    assert triage.classify([(0, done)]) is None
