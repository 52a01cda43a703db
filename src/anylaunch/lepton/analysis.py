"""Failure analysis for a Lepton job (the seed's get_failure_analysis, R-L15/16).

The real API has no such call: the platform only exposes the state, the counters, the
Kubernetes events and the logs. We classify from those, in a fixed order (the most
specific evidence first), and name the fix the seed gives for each failure mode.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from anylaunch.lepton import wire

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


def analyze(
    evidence: Evidence, *, pending_timeout_s: float = 900.0, now: float | None = None
) -> dict[str, Any] | None:
    """A dict with err_class, cause, suggestion, node events and log excerpts; None if healthy."""
    now = time.time() if now is None else now
    job, events = evidence.job, evidence.events
    status = job.status or wire.JobStatus()
    state = status.state
    oom = [e for e in events if e.reason == "OOMKilled"]
    oom_lines = [
        line for _, line in evidence.lines if re.search(r"out of memory|OutOfMemory", line)
    ]
    if oom or oom_lines or any("code 137" in (e.message or "") for e in events):
        return _result(
            evidence,
            "ERR_PROGRAM",
            "a replica ran out of memory and was killed (exit code 137)",
            "reduce the batch size (e.g. evaluation.batch_size) or max_length, or spread the "
            "model over more GPUs with tensor parallelism",
            [_node_event("OOM", e) for e in oom],
        )
    pull = [e for e in events if is_pull_failure(e)]
    if pull:
        return _result(
            evidence,
            "ERR_IMAGE_PULL",
            f"the image {job.spec.container.image} cannot be pulled",
            "check that NGC_KEY is set and valid (anylaunch makes the nvcr.io image pull "
            "secret from it) and that image_pull_secrets names it; then resubmit",
            [_node_event("ImagePullFailed", e) for e in pull],
        )
    mount = [e for e in events if e.reason == "FailedMount"]
    if mount:
        return _result(
            evidence,
            "ERR_INFRA",
            "node anomaly: a volume could not be mounted (ConfigError)",
            "cancel the job and resubmit it (Lepton schedules it on another node); if it "
            "happens again, use another dedicated_node_group or resource_shape",
            [_node_event("MountFailed", e) for e in mount],
        )
    evicted = [e for e in events if e.reason in ("Evicted", "Preempted")]
    if evicted:
        return _result(
            evidence,
            "ERR_INFRA",
            "the job was evicted from a shared node group",
            "resubmit it (anylaunch does so from the newest checkpoint, up to "
            "lepton.eviction_retries times) or use a dedicated_node_group, which is not preempted",
            [_node_event(e.reason, e) for e in evicted],
        )
    age = now - (job.metadata.created_at or now * 1000) / 1000
    if state in ("Queueing", "Awaiting", "Starting", "") and age > pending_timeout_s:
        return _result(
            evidence,
            "ERR_CAPACITY",
            f"pending for {int(age // 60)} min {int(age % 60)} s without a node (no capacity)",
            "try another resource_shape or dedicated_node_group, or wait until capacity frees up",
            [_node_event("FailedScheduling", e) for e in events if e.reason == "FailedScheduling"],
        )
    unready = [e for e in events if e.reason == "Unhealthy"]
    if unready and state == "Running" and status.ready < status.active:
        return _result(
            evidence,
            "ERR_INFRA",
            f"only {status.ready} of {status.active} replicas became ready; the others block rendezvous",
            "cancel the job and resubmit it so Lepton places it on other nodes",
            [_node_event("NotReady", e) for e in unready],
        )
    if state == "Failed":
        code = next(
            (
                m.group(1)
                for e in events
                if (m := re.search(r"exited with code (\d+)", e.message or ""))
            ),
            None,
        )
        return _result(
            evidence,
            "ERR_PROGRAM",
            f"the program exited with code {code}" if code else "the job failed",
            "read the log excerpts: fix the program or its configuration and resubmit",
            [],
        )
    return None


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
    evidence: Evidence, err_class: str, cause: str, suggestion: str, node_events: list[dict]
) -> dict[str, Any]:
    streams = _excerpts(evidence.lines)
    return {
        "err_class": err_class,
        "cause": cause,
        "suggestion": suggestion,
        "state": evidence.job.state,
        "job_failure_by_node_event": node_events,
        "log_streams": streams,
        "evidence": [f"{e['node_event_name']}: {e['message']}" for e in node_events][:5]
        + [line for s in streams for line in s["lines"] if _ERROR_LINE.search(line)][:5],
    }


def _excerpts(lines: list[tuple[str, str]], context: int = 20) -> list[dict[str, Any]]:
    """The last lines of each replica, where errors usually are."""
    by_replica: dict[str, list[str]] = {}
    for replica, line in lines:
        by_replica.setdefault(replica, []).append(line)
    return [{"replica": r, "lines": ls[-context:]} for r, ls in sorted(by_replica.items())]
