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
    if state == "Archived":
        return archived(job)
    return _DIRECT.get(state, State.UNKNOWN)  # Stopping, Deleting, Terminating, "" -> wait


def archived(job: wire.LeptonJob) -> State:
    """How an Archived job ended, from its counters alone: Lepton archives a job that
    completed or failed once its TTL after finishing has passed, and keeps no state
    before that. A failed worker means it failed; every worker succeeded means it
    completed; anything else (a job that failed before any worker ended, counters cut
    short) is UNKNOWN, never a guess."""
    status = job.status or wire.JobStatus()
    if status.failed:
        return State.FAILED
    if status.succeeded and status.succeeded >= (job.spec.completions or 1):
        return State.SUCCEEDED
    return State.UNKNOWN


def archived_detail(job: wire.LeptonJob) -> str:
    status = job.status or wire.JobStatus()
    return (
        f"archived past its TTL with {status.succeeded} of {job.spec.completions or 1}"
        f" workers succeeded and {status.failed} failed: how it ended is not known"
    )


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


def sdk_status(state: str, job: wire.LeptonJob | None = None) -> str:
    """TAO's Lepton SDK's coarse status: Pending / Running / Complete / Error, plus Cancelled.

    A job someone stopped did not fail: it reads Cancelled, never Error. An archived job
    reads as it ended (its counters say how), or Unknown when they cannot say.
    """
    if state == "Archived":
        ended = {State.SUCCEEDED: "Complete", State.FAILED: "Error"}
        found = archived(job or wire.LeptonJob(metadata=wire.Metadata()))
        return ended.get(found, "Unknown")
    return _SDK_STATUS.get(state, "Pending")
