"""A process's start time as psutil's `Process.create_time()` gives it, without psutil.

`run` records who submits a job (pid and start time, to tell a dead submitter from a
reused pid) and when the local supervisor started, both before the program's first
line; importing psutil for that alone cost 20-50 ms. On Linux the figure is read where
psutil reads it (the start in clock ticks from /proc/PID/stat, plus the boot time from
/proc/stat), so the two always agree; elsewhere psutil answers.
"""

from __future__ import annotations

import os


def create_time(pid: int | None = None) -> float:
    """Seconds since the epoch at which process `pid` (default: this one) started."""
    pid = os.getpid() if pid is None else pid
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
        # Fields after the command name, which may itself hold spaces and parentheses.
        started = int(data[data.rindex(b")") + 2 :].split()[19])
        return started / os.sysconf("SC_CLK_TCK") + _boot_time()
    except (OSError, ValueError, IndexError):
        import psutil

        return float(psutil.Process(pid).create_time())


def _boot_time() -> float:
    with open("/proc/stat", "rb") as stat:
        for line in stat:
            if line.startswith(b"btime"):
                return float(line.split()[1])
    raise ValueError("no btime in /proc/stat")
