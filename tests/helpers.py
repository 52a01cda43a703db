"""Helpers shared by test modules of every backend (importable as `helpers`)."""

from __future__ import annotations

import socket
import time

import psutil


def wait_until(predicate, timeout: float = 60, what: str = "condition", interval: float = 0.1):
    """Poll `predicate` until it is true (returned) or `timeout` seconds pass (an error)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def job_processes(job_id: str) -> list[psutil.Process]:
    """Every process on this machine that belongs to the job (by ANYLAUNCH_JOB_ID)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("ANYLAUNCH_JOB_ID") == job_id:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def free_port() -> int:
    """A port nothing listens on now. Jobs that rendezvous on this host take one each:
    another checkout's suite may run the same job at the same moment."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
