"""A pid read from the store is signalled only when the process is the one recorded
(pid and start time), and never when it is init or the kernel's: a store edited by
hand, restored from a backup or left by a crash must not make `cancel` kill a stranger."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from reliability_helpers import FIGURES

from anylaunch.backends.local.backend import _supervisor
from anylaunch.state import State
from anylaunch.store import JobRecord


def record(native_id: str, meta: dict) -> JobRecord:
    return JobRecord(
        id="job00001", name="j", backend="local", state=State.RUNNING, native_id=native_id,
        meta=meta, job_dir="/nonexistent", plan={"nodes": 1, "payload": {"nodes": []}},
    )  # fmt: skip


@pytest.mark.parametrize(
    "native_id, meta",
    [("1", {}), ("1", {"create_time": 0.0}), ("0", {}), ("-1", {}), ("9" * 5000, {})],
    ids=["init", "init-with-time", "zero", "negative", "huge"],
)
def test_no_supervisor_is_found_in_an_unproven_pid(native_id: str, meta: dict) -> None:
    FIGURES["hostile inputs"] += 1
    assert _supervisor(record(native_id, meta)) is None


def test_cancel_leaves_alone_a_process_whose_start_time_was_not_recorded(
    home: Path, spawns
) -> None:
    from anylaunch import api
    from anylaunch.store import Store

    stranger = subprocess.Popen(["sleep", "60"])
    try:
        store = Store(home)
        store.add(record(str(stranger.pid), {}))
        store.close()
        FIGURES["hostile inputs"] += 1
        api.get("job00001").cancel()
        time.sleep(0.5)
        assert stranger.poll() is None, "cancel signalled a process it could not prove was its own"
    finally:
        stranger.kill()
        stranger.wait()
