"""Failure analysis for a Lepton job: the facade's get_failure_analysis.

The real API has no such call: the platform only exposes the state, the counters, the
Kubernetes events and the logs. They are evidence for the one classifier in
anylaunch.observe.diagnose, the same `anylaunch diagnose` uses, so both name the same class;
this module adds the facade's fields (err_class, node events, log excerpts), the fix in
the facade's words, and the two checks only Lepton needs (queued past the threshold,
replicas that never become ready).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from anylaunch.backends.lepton.rest import wire
from anylaunch.observe.diagnose.engine import Diagnosis

PULL_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff"})
_ERROR_LINE = re.compile(
    r"Traceback|Error|error:|Killed|OOM|out of memory|exited with|NCCL|refused", re.IGNORECASE
)


@dataclass(frozen=True)
class Evidence:
    """What the API told us about one job."""

    job: wire.LeptonJob
    events: list[wire.Event]
    lines: list[tuple[str, str]]  # (replica id, line)


def is_pull_failure(event: wire.Event) -> bool:
    if event.reason in PULL_REASONS:
        return True
    text = (event.message or "").lower()
    return event.reason in ("Failed", "BackOff") and "pull" in text and "image" in text


def event_line(event: wire.Event) -> str:
    """One Kubernetes event as a diagnosis line; `anylaunch diagnose` reads the same."""
    return f"{event.type} {event.reason}: {event.message or ''}"


def diagnose(evidence: Evidence) -> Diagnosis:
    """The shared classifier's diagnosis from a Lepton job's state, events and logs."""
    from anylaunch.backends.lepton import states
    from anylaunch.observe.diagnose.engine import diagnose_lines
    from anylaunch.observe.diagnose.lines import parse

    lines = []
    for replica, text in evidence.lines:
        lines += parse(text, node=_replica_index(replica))
    return diagnose_lines(
        lines,
        state=states.to_state(evidence.job).value,
        exit_code=states.exit_code(evidence.events),
        events=[event_line(e) for e in evidence.events],
    )


def analyze(
    evidence: Evidence, *, pending_timeout_s: float = 900.0, now: float | None = None
) -> dict[str, Any] | None:
    """A dict with err_class, cause, suggestion, node events and log excerpts; None if healthy.

    The class comes from the shared classifier; what stays here is what only Lepton
    knows: a job queued past the threshold has no capacity, and a running job whose
    replicas never all become ready blocks its own rendezvous.
    """
    now = time.time() if now is None else now
    job, events = evidence.job, evidence.events
    status = job.status or wire.JobStatus()
    state = status.state
    found = diagnose(evidence)
    pending = state in ("Queueing", "Awaiting", "Starting", "")
    # Waiting for capacity is normal until the threshold: only then is it a failure.
    if found.code not in ("UNKNOWN", "NO_CAPACITY") and (state == "Failed" or _definitive(found)):
        return _result(evidence, found, _node_events(events))
    age = now - (job.metadata.created_at or now * 1000) / 1000
    if pending and age > pending_timeout_s:
        return _result(
            evidence,
            found,
            [_node_event("FailedScheduling", e) for e in events if e.reason == "FailedScheduling"],
            code="NO_CAPACITY",
            cause=f"pending for {int(age // 60)} min {int(age % 60)} s without a node (no capacity)",
        )
    unready = [e for e in events if e.reason == "Unhealthy"]
    if unready and state == "Running" and status.ready < status.active:
        return _result(
            evidence,
            found,
            [_node_event("NotReady", e) for e in unready],
            code="NODE_FAIL",
            cause=f"only {status.ready} of {status.active} replicas became ready; the others block rendezvous",
            suggestion="cancel the job and resubmit it so Lepton places it on other nodes",
        )
    if state == "Failed":
        return _result(evidence, found, _node_events(events))
    return None


# Seen while the job has not ended, these already are its failure.
_WHILE_RUNNING = frozenset(
    {
        "IMAGE_PULL",
        "CONTAINER_MOUNT",
        "AUTH",
        "OOM_HOST",
        "OOM_GPU",
        "PREEMPTED",
        "NODE_FAIL",
        "HARDWARE_GPU",
    }
)
# Each failure's fix, in the facade's words (batch size, NGC_KEY, node groups).
_FIX = {
    "OOM_GPU": "reduce the batch size (e.g. evaluation.batch_size) or max_length, or spread the "
    "model over more GPUs with tensor parallelism",
    "OOM_HOST": "reduce the batch size (e.g. evaluation.batch_size) or max_length, or spread the "
    "model over more GPUs with tensor parallelism; lower DataLoader num_workers",
    "IMAGE_PULL": "check that NGC_KEY is set and valid (anylaunch makes the nvcr.io image pull "
    "secret from it) and that image_pull_secrets names it; then resubmit",
    "CONTAINER_MOUNT": "cancel the job and resubmit it (Lepton schedules it on another node); if it "
    "happens again, use another dedicated_node_group or resource_shape",
    "PREEMPTED": "resubmit it (anylaunch does so from the newest checkpoint, up to "
    "lepton.eviction_retries times) or use a dedicated_node_group, which is not preempted",
    "NO_CAPACITY": "try another resource_shape or dedicated_node_group, or wait until capacity frees up",
    "USER_ERROR": "read the log excerpts: fix the program or its configuration and resubmit",
    "UNKNOWN": "read the log excerpts: fix the program or its configuration and resubmit",
}
_NODE_EVENT = {
    "OOMKilled": "OOM",
    "FailedMount": "MountFailed",
    "Evicted": "Evicted",
    "Preempted": "Preempted",
}


def _definitive(found: Diagnosis) -> bool:
    return found.code in _WHILE_RUNNING


def _node_events(events: list[wire.Event]) -> list[dict[str, Any]]:
    out = []
    for event in events:
        if is_pull_failure(event):
            out.append(_node_event("ImagePullFailed", event))
        elif event.reason in _NODE_EVENT:
            out.append(_node_event(_NODE_EVENT[event.reason], event))
    return out


def _replica_index(replica: str) -> int | None:
    """worker index from a replica id (`job-abc-3` -> 3), the node number diagnoses use."""
    tail = replica.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else None


def auth_failure(message: str) -> dict[str, Any]:
    """401/403 on every call: nothing else can be learned until the token is replaced."""
    return {
        "err_class": "ERR_AUTH",
        "cause": message,
        "suggestion": "LEPTON_AUTH_TOKEN is invalid or expired: create a new token in the "
        "Lepton dashboard (Settings → Tokens), export LEPTON_AUTH_TOKEN, and create the SDK again",
        "job_failure_by_node_event": [],
        "log_streams": [],
        "evidence": [message],
    }


def _node_event(name: str, event: wire.Event) -> dict[str, Any]:
    return {
        "node_event_name": name,
        "message": event.message or event.reason,
        "replica": (event.regarding or {}).get("name"),
        "count": event.count,
        "last_observed_time": event.last_observed_time,
    }


def _result(
    evidence: Evidence,
    found: Diagnosis,
    node_events: list[dict],
    *,
    code: str | None = None,
    cause: str | None = None,
    suggestion: str | None = None,
) -> dict[str, Any]:
    """The facade's answer; `code` and `cause` replace the classifier's when a
    Lepton-only check (pending past the threshold, replicas never ready) decided."""
    from anylaunch.observe.diagnose.classes import BY_CODE

    streams = _excerpts(evidence.lines)
    code = code or found.code
    if cause is None:
        cause = found.cause
        exit_code = _exit_code(evidence.events)
        if exit_code is not None and f"code {exit_code}" not in cause:
            cause = f"{cause} (the program exited with code {exit_code})"
    return {
        "err_class": BY_CODE[code].err_class,
        "code": code,
        "cause": cause,
        "suggestion": suggestion or _FIX.get(code, found.suggestion),
        "inferred": found.inferred if cause is found.cause else False,
        "state": evidence.job.state,
        "job_failure_by_node_event": node_events,
        "log_streams": streams,
        "evidence": [f"{e['node_event_name']}: {e['message']}" for e in node_events][:5]
        + [line for s in streams for line in s["lines"] if _ERROR_LINE.search(line)][:5],
    }


def _exit_code(events: list[wire.Event]) -> int | None:
    from anylaunch.backends.lepton import states

    return states.exit_code(events)


def _excerpts(lines: list[tuple[str, str]], context: int = 20) -> list[dict[str, Any]]:
    """The last lines of each replica, where errors usually are."""
    by_replica: dict[str, list[str]] = {}
    for replica, line in lines:
        by_replica.setdefault(replica, []).append(line)
    return [{"replica": r, "lines": ls[-context:]} for r, ls in sorted(by_replica.items())]
