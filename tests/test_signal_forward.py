"""The in-job runtime's `signal`: the early signal before a time limit goes to each of
the program's processes that handles it, never to one that does not (it would die of
it), and once per rank (not again to a worker that inherited its rank's handler)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from anylaunch.node.runtime import live

HANDLES = """
import os, signal, subprocess, sys, time
def on_usr1(*_):
    print("got USR1", os.getpid(), flush=True)
signal.signal(signal.SIGUSR1, on_usr1)
if len(sys.argv) > 1:  # a worker that inherits the handler, as a forked data loader's does
    up, down = os.pipe()
    if os.fork() == 0:
        os.write(down, b"x")
        time.sleep(60)
        os._exit(0)
    os.read(up, 1)
print("ready", flush=True)
time.sleep(60)
"""
IGNORANT = "import time; print('ready', flush=True); time.sleep(60)"


def start(code: str, *args: str, job: str, in_step: bool = True) -> subprocess.Popen[str]:
    env = {**os.environ, "ANYLAUNCH_JOB_ID": job}
    if in_step:
        env[live.IN_STEP] = "1"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args], env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    return proc


def test_only_the_processes_that_handle_it_get_it_once_per_rank(spawns):
    job = f"sigtest{os.getpid()}"
    rank = start(HANDLES, "fork", job=job)
    plain = start(IGNORANT, job=job)  # torchrun, or a rank that does not checkpoint
    outside = start(HANDLES, job=job, in_step=False)  # the batch shell, srun
    try:
        sent = live.forward(job, "USR1")
        assert sent == [rank.pid]
        assert rank.stdout is not None
        assert rank.stdout.readline().startswith(f"got USR1 {rank.pid}")
        time.sleep(0.5)
        assert plain.poll() is None and outside.poll() is None  # not killed, not signalled
        assert live.catches(rank.pid, signal.SIGUSR1)
        assert not live.catches(plain.pid, signal.SIGUSR1)
    finally:
        for left in live.job_processes(job):  # the worker too
            os.kill(left.pid, signal.SIGKILL)
        for proc in (rank, plain, outside):
            proc.kill()
            proc.wait()
