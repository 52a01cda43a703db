"""Messages a terminal or a paste wrapped onto two lines, and the shell's words in the
node's language: read as the emitter printed them."""

from __future__ import annotations

import pytest

from anylaunch.node.runtime import triage
from anylaunch.observe.diagnose.engine import diagnose_text
from anylaunch.observe.diagnose.lines import parse


@pytest.mark.parametrize(
    ("text", "code"),
    [
        (
            "RuntimeError: DataLoader worker (pid 47) is killed by signal: Bus\n"
            "error. It is possible that dataloader's workers are out of shared\n"
            "memory. Please try to raise your shared memory limit.",
            "SHM",
        ),
        (
            "E local_client.cc:672] Execution of replica 0 failed: Resource exhausted: Out \nof memory while trying to allocate 5520758552 bytes.",
            "OOM_GPU",
        ),
        (
            "Caused by: java.io.IOException: Disk quota\nexceeded\n  at java.io.FileOutputStream.write",
            "STORAGE",
        ),
    ],
)
def test_a_wrapped_message_is_read_whole(text, code):
    diagnosis = diagnose_text(text)
    assert diagnosis.code == code
    assert diagnosis.evidence[0]["line"] == 1  # the evidence is where the message starts


def test_a_line_that_opens_its_own_record_is_not_a_continuation():
    # "sed: ..." is a new line of the log, not the rest of the enroot command before it
    text = "$ enroot start cuda hostname\nsed: couldn't close stdout: No space left on device"
    assert diagnose_text(text).code == "STORAGE"


def test_what_the_next_line_says_alone_is_not_taken_from_the_join():
    text = "rank 1: training finished after 10 steps\nterminate called without an active exception"
    assert diagnose_text(text).code == "TEARDOWN_FAILED"


@pytest.mark.parametrize("word", ["Killed", "已杀死", "Getötet", "Убито", "**Killed**"])
def test_the_shells_killed_in_the_nodes_language_is_sigkill(word):
    diagnosis = diagnose_text(f"step 144 loss 0.58\n{word}")
    assert (diagnosis.code, diagnosis.inferred) == ("OOM_HOST", True)


def test_a_wrapped_line_whose_second_half_names_a_more_specific_failure_reads_joined():
    text = (
        "  srun: error: Unable to create step for job 238051: More\n"
        "  processors requested than permitted."
    )
    assert diagnose_text(text).code == "SUBMIT_CONFIG"
    assert diagnose_text(text.splitlines()[0]).code == "NO_CAPACITY"
    found = triage.classify([(0, text)])
    assert found is not None and found.code == "SUBMIT_CONFIG"


def test_a_log_cut_at_a_fixed_width_keeps_each_pieces_rank():
    width = 100
    log = [
        "[rank3]:[E ProcessGroupNCCL.cpp:537] Some NCCL operations have failed or timed out. Due to"
        " the asynchronous nature of CUDA kernels, subsequent GPU operations might run on"
        " corrupted/incomplete data.",
        "[rank3]:[E ProcessGroupNCCL.cpp:1182] NCCL watchdog thread terminated with exception:"
        " Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLGATHER,"
        " Timeout(ms)=600000) ran for 600168 milliseconds before timing out.",
    ]
    cut = "\n".join(line[i : i + width] for line in log for i in range(0, len(line), width))
    result = diagnose_text(cut)
    assert result.code == "NCCL_TIMEOUT"
    assert result.first_failure is not None and result.first_failure["rank"] == 3
    # two lines of one length by chance, wrapped at words, are not read as cut pieces
    words = "RuntimeError: DataLoader worker (pid 47) is killed by signal: Bus\nerror. It is"
    assert [line.text for line in parse(words)] == words.splitlines()
