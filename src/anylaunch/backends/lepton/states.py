"""Lepton job states onto anylaunch's vocabulary, and what a failure was.

Lepton says Running once any replica runs; like NeMo-Run we report STARTING while fewer
replicas are ready than active. Queueing/Awaiting wait for capacity or a start time.
A Failed job whose replicas were evicted or preempted is PREEMPTED: not the program's
fault, and worth resubmitting (Lepton itself does not restart it).
"""

from __future__ import annotations

import re

from anylaunch.backends.lepton.rest import wire
from anylaunch.state import State

_DIRECT = {
    "Queueing": State.PENDING,
    "Awaiting": State.PENDING,
    "PendingRetry": State.STARTING,
    "Restarting": State.STARTING,
    "Starting": State.STARTING,
    "Completed": State.SUCCEEDED,
    "Stopped": State.CANCELLED,
    "Deleted": State.CANCELLED,
}
# The SDK's status for each live or ended Lepton state; any other reads Pending.
_SDK_STATUS = {
    "Completed": "Complete",
    "Stopped": "Cancelled",
    "Deleted": "Cancelled",
    "Failed": "Error",
    "Running": "Running",
    "Deleting": "Running",
    "Stopping": "Running",
    "Terminating": "Running",
}
EVICTION_REASONS = frozenset({"Evicted", "Preempted", "Preempting"})
_EXIT = re.compile(r"exited with code (\d+)")


def to_state(job: wire.LeptonJob) -> State:
    status = job.status or wire.JobStatus()
    state = status.state
    if state == "Running":
        return State.STARTING if status.ready < status.active else State.RUNNING
    if state == "Failed":
        return State.FAILED
    if state == "Archived":  # past its TTL: the counters still tell how it ended
        if status.failed:
            return State.FAILED
        # Nothing failed: it completed, or it was stopped before any worker ended.
        return State.SUCCEEDED if status.succeeded else State.CANCELLED
    return _DIRECT.get(state, State.UNKNOWN)  # Stopping, Deleting, Terminating, "" -> wait


def evicted(events: list[wire.Event]) -> wire.Event | None:
    return next((e for e in events if e.reason in EVICTION_REASONS), None)


def exit_code(events: list[wire.Event]) -> int | None:
    for event in sorted(events, key=lambda e: e.last_observed_time, reverse=True):
        found = _EXIT.search(event.message or "")
        if found:
            return int(found.group(1))
    if any(e.reason == "OOMKilled" for e in events):
        return 137
    return None


def sdk_status(state: str, status: wire.JobStatus | None = None) -> str:
    """TAO's Lepton SDK's coarse status: Pending / Running / Complete / Error, plus Cancelled.

    A job someone stopped did not fail: it reads Cancelled, never Error. An archived job
    reads as it ended (its counters say how).
    """
    if state == "Archived":
        archived = {State.SUCCEEDED: "Complete", State.FAILED: "Error"}
        found = to_state(wire.LeptonJob(metadata=wire.Metadata(), status=status))
        return archived.get(found, "Cancelled")
    return _SDK_STATUS.get(state, "Pending")
