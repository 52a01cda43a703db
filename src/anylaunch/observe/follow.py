"""Following a job's logs while it runs, for `run` (attached) and `logs -f`.

Each node's log is read as whole lines from where the last read ended (`logread`), the
same way for files and for text fetched from a backend's API, and masked a line at a time.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from anylaunch.observe import logfile, watch

if TYPE_CHECKING:
    from anylaunch.api import Job


def follow(
    job: Job, *, node: int | None = None, tail: int | None = None, interval: float = 0.25
) -> Iterator[str]:
    """Yield complete lines as they appear, until the job is terminal and all is read.

    Polls every 20 ms for the first 5 s (torchrun alone takes seconds to start a
    program), then backs off to `interval`: the first line is the one a person waits
    for, and a short job's end the next. A fixed 0.25 s added 125 ms on average to
    `run`, and backing off from the start still added up to ~200 ms when the program
    took half a second to start; backing off once the first line was read delayed the
    end of a job that printed and exited by as much again. A poll of a live local job
    costs under a millisecond.
    """
    secrets = job.secrets()
    wait = min(0.02, interval)
    quick_until = time.monotonic() + 5.0
    seen = logfile.Offsets()
    first = True
    while True:
        # State first: lines written before it are read below. A job UNKNOWN for good
        # (its local supervisor died) writes no more lines either.
        terminal = job.status().terminal or job.settled_unknown()
        sources = watch.log_sources(job.record, node)
        prefix = len(sources) > 1
        for source in sources:
            lines = seen.read(source, job.record.job_dir, final=terminal)
            if first and tail is not None:
                lines = lines[-tail:] if tail > 0 else []
            for line in logfile.masked(lines, secrets):
                yield f"[node {source.node}] {line}" if prefix else line
        first = False
        if terminal:
            return
        time.sleep(wait)
        if time.monotonic() > quick_until:
            wait = min(wait * 1.5, interval)
