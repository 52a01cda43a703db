"""Switchable faults: which calls fail and how, and which jobs misbehave.

HTTP faults act on requests (matched by "METHOD /path" glob relative to the workspace);
job faults attach to jobs at creation (matched by job name glob) and drive the job's
life. A fault fires with probability `rate`, on every `every`-th match, at most `count`
times in all.
"""

from __future__ import annotations

import builtins
import fnmatch
import random
import threading
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

HTTP_KINDS = ("http", "http_after", "truncate", "drop", "slow")
JOB_KINDS = (
    "stuck_queue",
    "image_pull",
    "oom",
    "exit",
    "evict",
    "never_ready",
    "mount_error",
    "stream_drop",
    "unknown_state",
)
Kind = Literal[
    "http",  # answer `status` instead of serving the request
    "http_after",  # serve it (the job *is* created), then lose the answer: `status`
    "truncate",  # serve it, then send a 200 whose JSON body is cut short
    "drop",  # serve it, then close the connection mid-answer (the client sees no status)
    "slow",  # wait `delay_s`, then serve it
    "stuck_queue",  # the job stays Queueing, FailedScheduling events keep coming
    "image_pull",  # the image cannot be pulled: Starting forever, ErrImagePull events
    "oom",  # worker `worker` is OOM-killed (exit 137) `after_s` after it starts
    "exit",  # worker `worker` exits with `exit_code` after `after_s`
    "evict",  # every replica is evicted `after_s` after the job runs
    "never_ready",  # worker `worker` never becomes ready (partial gang)
    "mount_error",  # worker `worker` cannot mount its volume (node ConfigError)
    "stream_drop",  # live log streams of the job close after `after_s`
    "unknown_state",  # the job reports state "" for `after_s` seconds
]


class Fault(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Kind
    route: str | None = Field(default=None, description="'METHOD /path' glob, e.g. 'POST /jobs'")
    job: str | None = Field(default=None, description="job name glob, e.g. 'oom-*'")
    status: int = 503
    retry_after: float | None = None
    rate: float = Field(default=1.0, ge=0, le=1)
    every: int | None = Field(default=None, ge=1)
    count: int | None = Field(default=None, ge=1)
    worker: int = Field(default=0, ge=0)
    after_s: float = Field(default=0.0, ge=0)
    exit_code: int = 1
    delay_s: float = Field(default=1.0, ge=0, le=300)


class FaultBook:
    """The active faults, shared by the request middleware and the job loop."""

    def __init__(self, seed: int | None = None) -> None:
        self._faults: list[Fault] = []
        self._seen: dict[int, int] = {}  # fault index -> matches so far
        self._fired: dict[int, int] = {}  # fault index -> times fired
        self._lock = threading.Lock()
        self._rng = random.Random(seed)

    def add(self, faults: list[Fault]) -> int:
        """Add faults; returns the index of the first one added."""
        with self._lock:
            start = len(self._faults)
            self._faults.extend(faults)
            return start

    def clear(self) -> None:
        with self._lock:
            self._faults, self._seen, self._fired = [], {}, {}

    def list(self) -> list[Fault]:
        with self._lock:
            return list(self._faults)

    def for_request(self, method: str, path: str) -> Fault | None:
        """The first HTTP fault that fires for this call, if any."""
        call = f"{method} {path}"
        with self._lock:
            for index, fault in enumerate(self._faults):
                if fault.kind not in HTTP_KINDS or not _match(fault.route, call):
                    continue
                if self._fires(index, fault):
                    return fault
        return None

    def for_job(self, name: str, start: int = 0) -> builtins.list[Fault]:  # `list` is a method
        """The job faults a job carries for its whole life (those from index `start` on)."""
        out = []
        with self._lock:
            for index, fault in enumerate(self._faults):
                if index < start:
                    continue
                if (
                    fault.kind in JOB_KINDS
                    and _match(fault.job, name)
                    and self._fires(index, fault)
                ):
                    out.append(fault)
        return out

    def _fires(self, index: int, fault: Fault) -> bool:
        seen = self._seen[index] = self._seen.get(index, 0) + 1
        if fault.count is not None and self._fired.get(index, 0) >= fault.count:
            return False
        if fault.every is not None and seen % fault.every:
            return False
        if fault.rate < 1 and self._rng.random() >= fault.rate:
            return False
        self._fired[index] = self._fired.get(index, 0) + 1
        return True


def _match(pattern: str | None, value: str) -> bool:
    return pattern is None or fnmatch.fnmatchcase(value, pattern)
