"""Messages a terminal or a paste wrapped onto two lines, and the shell's words in the
node's language: read as the emitter printed them."""

from __future__ import annotations

import pytest

from anylaunch.observe.diagnose.engine import diagnose_text


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
