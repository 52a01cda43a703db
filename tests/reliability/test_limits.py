"""Size limits: inputs that used to take unbounded time (a 10 MB command split in
quadratic time, `nodes: 1000000000` planned node by node, a 30 MB job file) end at once
with one line that names the real problem, exit 2; the local backend is bounded by
what this machine can run unless forced.

Each CLI call runs in the test process under a timeout far above what it needs: a hang
fails the test, and no assertion depends on the machine's speed. The wall time of each
is printed (pytest -s) for the record.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reliability_helpers import FIGURES, cli_env, count_tracebacks

import inproc
from anylaunch.jobfile import limits

GENEROUS_S = 60  # not a speed claim: only "it ends", on a loaded machine
pytestmark = pytest.mark.timeout(GENEROUS_S)


def _run(
    text: str, tmp_path: Path, home: Path, *args: str
) -> tuple[subprocess.CompletedProcess[str], float]:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    began = time.monotonic()
    done = inproc.completed(("run", str(path), *args), cli_env(home), tmp_path)
    took = time.monotonic() - began
    FIGURES["hostile inputs"] += 1
    assert count_tracebacks(done.stdout, done.stderr) == 0, done.stderr[-2000:]
    return done, took


def _one_line_refusal(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout[-500:], done.stderr[-2000:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-2000:]
    return lines[0]


@pytest.mark.parametrize(
    "text, says",
    [
        ('command: "' + "x" * (10 << 20) + '"\n', "the job file is over 4.0 MiB"),
        ("command: [echo]\nw: [" + ", ".join(["1"] * 250_000) + "]\n", "about 250001 values"),
        ("command: [echo]\nrecipe_list:\n" + "- 1\n" * 250_000, "about 250002 values"),
        ("command: [" + ", ".join(["x"] * 150_000) + "]\n", "the command is 146 KiB"),
        ("command: [echo]\nsplits: [" + ", ".join(["1" * 198] * 150_000) + "]\n", "over 4.0 MiB"),
        ('command: "' + "x" * (200 << 10) + '"\n', "the command is 200 KiB, over the 128 KiB"),
        ("command: [" + ", ".join(["x" * 1000] * 200) + "]\n", "over the 128 KiB"),
        ("command: [echo]\nnodes: 1000000000\n", "at most 10000"),
        ("command: [echo]\nnodes: 100000\nslurm: {}\n", "at most 10000"),
        ("command: [echo]\nlepton: {resource_shape: cpu.small, num_nodes: 20000}\nimage: x\n",
         "at most 10000"),
        ("command: [echo]\nsplits: 1000000000\n", "splits"),
        ("command: [echo]\nnodes: 1000\n", "set local.force: true"),
        ("command: [echo]\nnodes: 2\nlocal: {nproc_per_node: 1000}\n", "set local.force: true"),
    ],
    ids=["10MB-command", "huge-list", "huge-block-list", "long-command-list", "30MB-file", "200KiB-command", "200KiB-list",
         "nodes-1e9", "slurm-1e5-nodes", "lepton-2e4-nodes", "splits-1e9", "local-1000-nodes",
         "local-2000-processes"],
)  # fmt: skip
def test_oversized_jobs_end_at_once_with_one_line_naming_the_real_problem(
    text: str, says: str, tmp_path: Path, home: Path
) -> None:
    done, took = _run(text, tmp_path, home)
    message = _one_line_refusal(done)
    assert says in message and "alias" not in message, message
    print(f"{len(text)} bytes refused in {took:.2f}s: {message[:120]}")


def test_the_acceptance_cases_answer_in_json_too(tmp_path: Path, home: Path) -> None:
    for text in ('command: "' + "x" * (10 << 20) + '"\n', "command: [echo]\nnodes: 1000000000\n"):
        done, took = _run(text, tmp_path, home, "--json")
        assert done.returncode == 2 and "error" in json.loads(done.stdout)
        print(f"--json refusal in {took:.2f}s")


def test_a_forced_local_job_may_exceed_the_machines_size(tmp_path: Path, home: Path) -> None:
    from anylaunch.backends.local.backend import most_ranks

    ranks = most_ranks() + 1
    done, _ = _run(
        f"command: [echo]\nlauncher: none\nnodes: {ranks}\nlocal: {{force: true}}\n",
        tmp_path, home, "--dry-run", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(json.loads(done.stdout)["plan"]["payload"]["nodes"]) == ranks


def test_a_command_at_the_limit_is_accepted(tmp_path: Path, home: Path) -> None:
    word = "x" * (limits.MAX_COMMAND_BYTES - 10)
    done, _ = _run(f"command: [echo, {word}]\nlauncher: none\n", tmp_path, home, "--dry-run")
    assert done.returncode == 0, done.stderr[-2000:]


@settings(max_examples=3000, deadline=None)
@given(st.text(" \t\r\n\x0b'\"\\ab#$|;&()<>*\u00e9\x00", max_size=40), st.booleans())
def test_command_lines_split_as_shlex_does(line: str, comments: bool) -> None:
    """The linear splitter gives shlex.split's words, and its errors, for any line."""
    import shlex

    from anylaunch.jobfile import shellwords

    def words(split):
        try:
            return split(line, comments=comments)
        except ValueError as exc:
            return ("error", str(exc))

    assert words(shellwords.split) == words(shlex.split)


def test_a_long_word_at_the_limit_splits_whole(tmp_path: Path, home: Path) -> None:
    """A 128 KiB word: shlex copied it once per character while checking the line; it
    loads now (the test's generous timeout is the only clock)."""
    word = "y" * (limits.MAX_COMMAND_BYTES - 10)
    done, took = _run(
        f'command: "echo {word}"\nlauncher: none\n', tmp_path, home, "--dry-run", "--json"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["backend"] == "local"
    print(f"a {len(word)}-byte word loaded and planned in {took:.2f}s")
