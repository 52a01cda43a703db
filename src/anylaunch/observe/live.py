"""Reaching a running job: a command or a shell on one of its nodes, and the Python stack
of every rank.

Each backend says how to get onto a node (`Backend.enter`, `Backend.stacks`): the local
backend runs the command here in the node's environment, Slurm through `srun --overlap`
into the job's allocation, SkyPilot through the cluster's ssh alias. This module checks
that the job runs, runs what the backend answered, and masks what comes back: the job's
secrets never reach the screen or an agent through a command of ours.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from typing import IO, Any

from anylaunch.backends.base import Entry, get_backend
from anylaunch.errors import UsageError
from anylaunch.jobfile.secrets import mask
from anylaunch.node import runtime
from anylaunch.observe import watch
from anylaunch.state import State

# What one captured command (the MCP tools) may bring back, per stream.
MAX_OUTPUT = 1 << 20


class NotRunning(UsageError):
    """The job has nothing running to reach: it has not started, or it ended."""

    code = "NOT_RUNNING"


def running(job_id: str, node: int | None = None) -> watch.Job:
    """The job, polled now, if it runs (and has node `node`)."""
    job = watch.get(job_id)
    state = job.status()
    if state.terminal:
        raise NotRunning(
            f"job {job.id} is {state.value}: nothing of it runs — read its output with"
            f" anylaunch logs {job.id}"
        )
    if state is State.PENDING:
        raise NotRunning(
            f"job {job.id} is PENDING: nothing of it runs yet — wait until it is RUNNING"
            f" (anylaunch status {job.id})"
        )
    if node is not None:
        watch.log_sources(job.record, node)  # a node outside the job: one line, exit 2
    return job


def entry(job_id: str, node: int, command: Sequence[str], *, tty: bool) -> tuple[watch.Job, Entry]:
    job = running(job_id, node)
    return job, get_backend(job.backend).enter(job.record, node, command, tty=tty)


def stacks(job_id: str, node: int | None = None) -> dict[str, Any]:
    """What `stack --json` prints: every rank's Python stack, by rank."""
    job = running(job_id, node)
    names = job.record.plan.get("secret_env", [])
    found = get_backend(job.backend).stacks(job.record, node, runtime.py_spy(), names)
    hidden = job.secrets()
    ranks = []
    for rank in sorted(found, key=lambda r: (r.get("rank") is None, r.get("rank") or 0)):
        number = rank.get("rank")
        which = number if number is not None else f"pid-{rank.get('pid')}"
        ranks.append(
            {
                "id": f"{job.id}/{which}",
                "kind": "rank",
                "rank": number,
                "local_rank": rank.get("local_rank"),
                "node": rank.get("node"),
                "pid": rank.get("pid"),
                "host": rank.get("host"),
                "stack": _masked(rank.get("stack"), hidden),
                "error": _masked(rank.get("error"), hidden),
            }
        )
    return {"id": job.id, "kind": "stack", "node": node, "ranks": ranks}


def _masked(text: str | None, hidden: set[str]) -> str | None:
    return None if text is None else mask(text, hidden)


def stack_text(result: dict[str, Any]) -> str:
    """`stack` for people: each rank's header, then its stack (or why there is none)."""
    if not result["ranks"]:
        where = "" if result["node"] is None else f" on node {result['node']}"
        return f"no rank of job {result['id']} found{where} (no process with RANK set)\n"
    out = []
    for rank in result["ranks"]:
        out.append(
            f"== rank {rank['rank']} (node {rank['node']}, pid {rank['pid']}, {rank['host']})"
        )
        out.append((rank["stack"] or f"no stack: {rank['error']}\n").rstrip("\n"))
        out.append("")
    return "\n".join(out)


# -- a command on a node ------------------------------------------------------------------


def _hidden(job: watch.Job, where: Entry) -> set[str]:
    return job.secrets() | set(where.secrets)


def _start(where: Entry, **streams: Any) -> subprocess.Popen[bytes]:
    """Start what the backend answered; a program that cannot start is one line."""
    try:
        return subprocess.Popen(
            where.argv,
            env=None if where.env is None else dict(where.env),
            cwd=where.cwd,
            **streams,
        )
    except OSError as exc:
        raise CannotStart(
            f"cannot run {where.argv[0]} ({where.via}): {exc.strerror} — check the command"
            " and the node's PATH"
        ) from None


class CannotStart(UsageError):
    """The command (or the way onto the node) could not be started."""

    code = "CANNOT_START"
    exit_status = 127


def exec_stream(
    job_id: str, node: int, command: Sequence[str], *, note: Callable[[str], None] | None = None
) -> int:
    """Run `command` on the node with this terminal's input; its output, masked a line at
    a time, goes to this process's stdout and stderr. The command's exit status."""
    job, where = entry(job_id, node, command, tty=False)
    if note is not None:
        note(f"anylaunch: job {job.id} node {node}: {where.via}")
    hidden = _hidden(job, where)
    proc = _start(where, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    pumps = [
        threading.Thread(target=_pump, args=(proc.stdout, sys.stdout.buffer, hidden)),
        threading.Thread(target=_pump, args=(proc.stderr, sys.stderr.buffer, hidden)),
    ]
    for pump in pumps:
        pump.start()
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        code = proc.wait()
    for pump in pumps:
        pump.join()
    return code


def _pump(source: IO[bytes], sink: IO[bytes], hidden: set[str]) -> None:
    for raw in iter(source.readline, b""):
        line = raw.decode("utf-8", "replace")
        sink.write(mask(line, hidden).encode("utf-8", "replace"))
        sink.flush()


def exec_capture(
    job_id: str, node: int, command: Sequence[str], timeout_s: float
) -> dict[str, Any]:
    """Run `command` on the node with no input; its exit status and output, masked.
    Past `timeout_s` it is stopped (`timed_out`), and each stream keeps its first MiB."""
    job, where = entry(job_id, node, command, tty=False)
    proc = _start(
        where,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    return {
        "id": job.id,
        "kind": "exec",
        "node": node,
        "command": list(command),
        "via": where.via,
        **_collect(proc, timeout_s, _hidden(job, where)),
    }


def _collect(proc: subprocess.Popen[bytes], timeout_s: float, hidden: set[str]) -> dict[str, Any]:
    """Wait for `proc` up to `timeout_s` (then end its process group); its output."""
    kept: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}

    def keep(stream: IO[bytes] | None, into: bytearray) -> None:
        if stream is None:
            return
        for chunk in iter(lambda: stream.read(65536), b""):
            into += chunk[: max(0, MAX_OUTPUT - len(into))]

    readers = [
        threading.Thread(target=keep, args=(proc.stdout, kept["stdout"]), daemon=True),
        threading.Thread(target=keep, args=(proc.stderr, kept["stderr"]), daemon=True),
    ]
    for reader in readers:
        reader.start()
    code, timed_out = _wait_or_end(proc, timeout_s)
    for reader in readers:
        reader.join(timeout=5)
    return {
        "exit_code": code,
        "timed_out": timed_out,
        "stdout": mask(kept["stdout"].decode("utf-8", "replace"), hidden),
        "stderr": mask(kept["stderr"].decode("utf-8", "replace"), hidden),
    }


def _wait_or_end(proc: subprocess.Popen[bytes], timeout_s: float | None) -> tuple[int | None, bool]:
    """The process's exit status, or (None, True) once `timeout_s` passed and its group
    was ended."""
    try:
        return proc.wait(timeout=timeout_s), False
    except subprocess.TimeoutExpired:
        _end_group(proc)
        return None, True


def _end_group(proc: subprocess.Popen[bytes]) -> None:
    import signal

    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=5)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


# -- a shell on a node --------------------------------------------------------------------


def shell(job_id: str, node: int, *, note: Callable[[str], None] | None = None) -> int:
    """An interactive shell on the node, on this terminal: what is typed there and what it
    prints are the user's own (nothing of ours is in between). Its exit status."""
    tty = sys.stdin.isatty()
    job, where = entry(job_id, node, [], tty=tty)
    if note is not None:
        note(f"anylaunch: job {job.id} node {node}: {where.via} (exit the shell to return)")
    proc = _start(where)
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:
            continue  # Ctrl-C belongs to the shell's foreground program, which got it too


def shell_transcript(job_id: str, node: int, text: str, timeout_s: float) -> dict[str, Any]:
    """A shell on the node under a pseudo-terminal, fed `text` then end-of-input: what
    it printed (masked) and its exit status. For agents, which have no terminal."""
    import pty

    job, where = entry(job_id, node, [], tty=True)
    leader, follower = pty.openpty()
    try:
        proc = _start(
            where, stdin=follower, stdout=follower, stderr=follower, start_new_session=True
        )
    finally:
        os.close(follower)
    typed = text if text.endswith("\n") or not text else text + "\n"
    writer = threading.Thread(target=_type, args=(leader, typed), daemon=True)
    writer.start()
    out = os.fdopen(leader, "rb", buffering=0)
    result = _collect_pty(proc, out, timeout_s, _hidden(job, where))
    return {"id": job.id, "kind": "shell", "node": node, "via": where.via, **result}


def _type(fd: int, text: str) -> None:
    """Type `text` into the terminal, then end-of-input (Ctrl-D on a line of its own)."""
    try:
        os.write(fd, text.encode())
        os.write(fd, b"\x04")
    except OSError:
        pass  # the shell ended before reading it all


def _collect_pty(
    proc: subprocess.Popen[bytes], out: IO[bytes], timeout_s: float, hidden: set[str]
) -> dict[str, Any]:
    kept = bytearray()

    def keep() -> None:
        while True:
            try:
                chunk = out.read(65536)
            except OSError:  # EIO: every process holding the terminal closed it
                return
            if not chunk:
                return
            kept.extend(chunk[: max(0, MAX_OUTPUT - len(kept))])

    reader = threading.Thread(target=keep, daemon=True)
    reader.start()
    code, timed_out = _wait_or_end(proc, timeout_s)
    reader.join(timeout=5)
    out.close()
    text = kept.decode("utf-8", "replace").replace("\r\n", "\n")
    return {"exit_code": code, "timed_out": timed_out, "output": mask(text, hidden)}
