"""A process's start time as psutil's `Process.create_time()` gives it, without psutil.

`run` records who submits a job (pid and start time, to tell a dead submitter from a
reused pid) and when the local supervisor started, both before the program's first
line, and every poll of a local job asks whether its supervisor still runs; importing
psutil for that alone cost 20-50 ms. On Linux the figure is read where
psutil reads it (the start in clock ticks from /proc/PID/stat, plus the boot time from
/proc/stat), so the two always agree; elsewhere psutil answers.
"""

from __future__ import annotations

import os


def create_time(pid: int | None = None) -> float:
    """Seconds since the epoch at which process `pid` (default: this one) started."""
    pid = os.getpid() if pid is None else pid
    try:
        return _stat(pid)[1]
    except (OSError, ValueError, IndexError):
        import psutil

        return float(psutil.Process(pid).create_time())


def running(pid: int, started: float | None) -> bool:
    """Whether process `pid` runs (a zombie does not) and is the one that started at
    `started` (give or take 0.5 s), not a later process that got its pid."""
    try:
        state, created = _stat(pid)
    except FileNotFoundError:
        return False
    except (OSError, ValueError, IndexError):
        return _running_by_psutil(pid, started)
    return state != "Z" and (started is None or abs(created - started) <= 0.5)


def _stat(pid: int) -> tuple[str, float]:
    """The process's state letter and start time, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat", "rb") as stat:
        data = stat.read()
    # Fields after the command name, which may itself hold spaces and parentheses.
    fields = data[data.rindex(b")") + 2 :].split()
    started = int(fields[19]) / os.sysconf("SC_CLK_TCK") + _boot_time()
    return fields[0].decode(), started


def _running_by_psutil(pid: int, started: float | None) -> bool:
    import psutil

    try:
        proc = psutil.Process(pid)
        if started is not None and abs(proc.create_time() - started) > 0.5:
            return False
        return bool(proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def _boot_time() -> float:
    with open("/proc/stat", "rb") as stat:
        for line in stat:
            if line.startswith(b"btime"):
                return float(line.split()[1])
    raise ValueError("no btime in /proc/stat")
