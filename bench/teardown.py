"""Runs failed at exit after the work ended: anylaunch beside plain elastic torchrun.

The same gloo program (two nodes of one rank each on this machine, all-reduces, a line per
rank when its work is done, no `destroy_process_group`) runs through `anylaunch run` and
through two plain torchrun agents meeting by `--rdzv-backend=c10d`, interleaved. With
torch's gloo group a rank now and then aborts at exit ("terminate called without an
active exception", SIGABRT) after every rank printed its line; plain torchrun then fails
the node, and the other agent waits out its exit barrier. A run counts as failed after
the work ended when every rank printed its line and the run did not end with 0 in time.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from anylaunch.backends.local.plan import AGENT_FILE
from bench.common import ROOT, Row, failed

GROUP = "teardown"
GOAL = "0 runs failed after the work ended"
DONE = "bench: work done"
RANKS = 2
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
# A plain run whose node aborted waits in the other agent's exit barrier (300 s): such a
# run is stopped here and counted as hung.
RUN_LIMIT_S = 120.0

PROGRAM = f"""\
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(1000)
for _ in range(20):
    dist.all_reduce(t)
print(f"{DONE} rank={{dist.get_rank()}}", flush=True)
"""


def run(rounds: int = 20) -> list[Row]:
    case = f"gloo program, 2 nodes x 1 rank, {rounds} runs"
    work = Path(tempfile.mkdtemp(prefix="bench-teardown-"))
    try:
        (work / "prog.py").write_text(PROGRAM)
        (work / "job.yaml").write_text(
            "name: bench-teardown\ncommand: python prog.py\nnodes: 2\nranks_per_node: 1\n"
            "local: {workdir: .}\n"
        )
        bindir = Path(sys.executable).parent
        env = {
            **os.environ,
            "ANYLAUNCH_HOME": str(work / "home"),
            "OMP_NUM_THREADS": "1",
            "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        agent = str(ROOT / "src" / "anylaunch" / "backends" / "local" / AGENT_FILE)
        ours: list[tuple[str, str]] = []
        wrapped: list[tuple[str, str]] = []
        plain: list[tuple[str, str]] = []
        for i in range(rounds):
            ours.append(_once([[str(bindir / "anylaunch"), "run", "job.yaml"]], work, env))
            wrapped.append(_once(_agents([sys.executable, agent], f"w-{i}"), work, env))
            plain.append(_once(_agents(TORCHRUN, f"p-{i}"), work, env))
            print(
                f"bench: teardown run {i + 1}: anylaunch {ours[-1][1]},"
                f" its agent (c10d) {wrapped[-1][1]}, plain (c10d) {plain[-1][1]}",
                file=sys.stderr,
                flush=True,
            )
        b = _failed_after_work(plain)
        other = f"plain torchrun (c10d) {b}/{rounds}"
        return [
            _row(f"anylaunch run, {case}", ours, rounds, other, _outcomes(plain)),
            _row(
                f"anylaunch's torchrun agent, --rdzv-backend=c10d, {case}",
                wrapped,
                rounds,
                other,
                _outcomes(plain),
            ),
        ]
    except Exception as exc:
        return [failed(GROUP, case, GOAL, exc)]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _row(case: str, runs: list[tuple[str, str]], rounds: int, other: str, plain: str) -> Row:
    failed_after_work = _failed_after_work(runs)
    absorbed = sum(out.count("in Python's teardown after its program") for out, _ in runs)
    return Row(
        GROUP,
        case,
        ours=f"{failed_after_work}/{rounds} failed after the work ended",
        other=other,
        goal=GOAL,
        met=failed_after_work == 0,
        note=f"{_outcomes(runs)}; {absorbed} rank aborts in teardown counted as exit 0;"
        f" plain: {plain}",
        data={
            "rounds": rounds,
            "failed_after_work": failed_after_work,
            "absorbed": absorbed,
            "outcomes": [o for _, o in runs],
        },
    )


def _agents(torchrun: list[str], run_id: str) -> list[list[str]]:
    """Two agents of one rank each, meeting by the c10d rendezvous (torch's elastic mode)."""
    endpoint = f"127.0.0.1:{_free_port()}"
    agent = [*torchrun, "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
             "--rdzv-endpoint", endpoint, "--rdzv-id", run_id, "--max-restarts", "0",
             "prog.py"]  # fmt: skip
    return [agent, agent]


def _once(commands: list[list[str]], cwd: Path, env: dict[str, str]) -> tuple[str, str]:
    """Every command at once: (their output, `ok`, `failed` or `hung`)."""
    logs = [cwd / f"out-{i}.log" for i in range(len(commands))]
    procs = []
    for argv, log in zip(commands, logs, strict=True):
        with log.open("w") as out:
            procs.append(
                subprocess.Popen(
                    argv,
                    cwd=cwd,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
    deadline = time.monotonic() + RUN_LIMIT_S
    codes = []
    for proc in procs:
        try:
            codes.append(proc.wait(timeout=max(0.1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            codes.append(None)
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    output = "".join(log.read_text(errors="replace") for log in logs)
    outcome = "hung" if None in codes else "ok" if codes == [0] * len(codes) else "failed"
    return output, outcome


def _failed_after_work(runs: list[tuple[str, str]]) -> int:
    return sum(1 for out, outcome in runs if outcome != "ok" and out.count(DONE) >= RANKS)


def _outcomes(runs: list[tuple[str, str]]) -> str:
    aborts = sum(1 for out, _ in runs if "terminate called without an active exception" in out)
    counts = {k: sum(1 for _, o in runs if o == k) for k in ("ok", "failed", "hung")}
    return ", ".join(f"{n} {k}" for k, n in counts.items() if n) + f", {aborts} with an abort"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
