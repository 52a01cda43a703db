"""Local launch overhead: `anylaunch run job.yaml` vs bare `torchrun` on the same script.

Measured as a user feels it: from starting the command to the first line of the user
program on the terminal. Both run the same torchrun options (one node, one rank, a free
master port); the program prints one line and exits, so what differs is only anylaunch:
CLI start-up, config, preflight, the store, the detached supervisor and log following.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import Row, failed, interleaved, median_ms, ms

GROUP = "local launch"
# Over bare python the goal is tighter than over bare torchrun: torchrun's own start-up
# varies by hundreds of milliseconds between runs on a loaded machine.
GOAL_S = {"none": 0.3, "torchrun": 0.5}
MARK = "bench: first line"


def run(rounds: int = 11) -> list[Row]:
    # Eleven: a torchrun start is seconds of two CPUs' time, and seven samples let one
    # slow minute move the median by 300 ms (+167 to +503 ms over a day's runs).
    return [_row("torchrun", rounds), _row("none", 2 * rounds)]


def _row(launcher: str, rounds: int) -> Row:
    """`launcher: none` against bare python isolates anylaunch's own share: torchrun's
    start-up (seconds, and noisy on a loaded machine) is then on neither side."""
    case = f"first line of the program, launcher: {launcher}"
    alternative = "torchrun" if launcher == "torchrun" else "python"
    goal = f"≤ {alternative} + {GOAL_S[launcher] * 1000:.0f} ms"
    bindir = Path(sys.executable).parent
    torchrun = bindir / "torchrun"
    anylaunch = bindir / "anylaunch"
    work = Path(tempfile.mkdtemp(prefix="bench-launch-"))
    try:
        (work / "first_line.py").write_text(f"print({MARK!r}, flush=True)\n")
        (work / "job.yaml").write_text(
            f"name: bench-launch\ncommand: python first_line.py\nlauncher: {launcher}\n"
            "local: {workdir: .}\n"
        )
        # `python` in the job is the interpreter the bare side runs, as in an activated
        # virtual environment: a version manager's shim found first on PATH instead
        # (pyenv's takes 0.3 s) would be counted as anylaunch's overhead.
        env = {
            **os.environ,
            "ANYLAUNCH_HOME": str(work / "home"),
            "OMP_NUM_THREADS": "1",
            "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        ours = [str(anylaunch), "run", str(work / "job.yaml")]

        def bare() -> list[str]:
            if launcher == "none":
                return [sys.executable, "first_line.py"]
            return [str(torchrun), "--nnodes", "1", "--nproc-per-node", "1",
                    "--master-addr", "127.0.0.1", "--master-port", str(_free_port()),
                    "--max-restarts", "0", "first_line.py"]  # fmt: skip

        firsts: dict[str, list[float]] = {"anylaunch": [], "bare": []}
        samples = interleaved(
            {
                "anylaunch": lambda: firsts["anylaunch"].append(_first_line(ours, work, env)),
                "bare": lambda: firsts["bare"].append(_first_line(bare(), work, env)),
            },
            rounds,
        )
        del samples  # whole-process times; what counts is the time to the first line
        a = median_ms(firsts["anylaunch"][1:])  # [0] is the untimed warm-up
        b = median_ms(firsts["bare"][1:])
        return Row(
            GROUP,
            case,
            ours=ms(a),
            other=f"{alternative} {ms(b)}",
            goal=goal,
            met=a - b <= GOAL_S[launcher] * 1000,
            note=f"overhead {a - b:+.0f} ms = {a / b:.2f}× {alternative}; median of {rounds},"
            " interleaved",
            data={"anylaunch_ms": a, "bare_ms": b, "overhead_ms": a - b},
        )
    except Exception as exc:
        return failed(GROUP, case, goal, exc)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _first_line(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    """Seconds until MARK appears on the command's stdout; then let it finish."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert proc.stdout is not None
    seen = None
    for line in proc.stdout:
        if seen is None and MARK in line:
            seen = time.perf_counter() - start
    if proc.wait() != 0 or seen is None:
        raise RuntimeError(f"{Path(argv[0]).name} exited {proc.returncode} without the first line")
    return seen


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
