"""Live logs for the job page as server-sent events, every node's lines as they appear.

Each tick reads the job's state first and then what each node's log gained, so lines
written before the job ended are always sent before the `end` event (the rule of
`anylaunch.observe.follow.follow`). Offsets only advance over complete lines, and each event's id
holds them: a browser that reconnects (EventSource sends Last-Event-ID) resumes where it
stopped, without a repeated or a half line.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

from starlette.concurrency import run_in_threadpool

from anylaunch.observe import watch
from anylaunch.observe.logfile import Offsets
from anylaunch.state import State
from anylaunch.store import Store
from anylaunch.ui.detail import secret_names
from anylaunch.ui.masking import Masker

TAIL_BYTES = 256 << 10  # a new viewer gets the end of a long log, not all of it
KEEPALIVE_S = 15.0


def _tick(
    root: Path, job_id: str, offsets: Offsets
) -> tuple[str, list[tuple[int, str]], dict[str, str | None]]:
    """One look at the job: its state, then the new lines of every node (in a worker thread:
    the store's connection is opened and closed here, in the thread that uses it)."""
    store = Store(root)
    try:
        job = watch.get(job_id, store=store)
        try:
            state = job.status()
        except Exception:  # backend unreachable now: the stored state, and try again next tick
            state = job.record.state
        record = job.record
        lines = []
        for source in watch.log_sources(record):
            lines += [
                (source.node, line)
                for line in offsets.read(
                    source, record.job_dir, final=state.terminal, tail_bytes=TAIL_BYTES
                )
            ]
        return state.value, lines, secret_names(record, root)
    finally:
        store.close()


def _event(kind: str, data: object, event_id: str | None = None) -> str:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data)}\n\n"


async def stream(
    root: Path, job_id: str, masker: Masker, last_event_id: str | None, interval: float = 1.0
) -> AsyncIterator[str]:
    """`line` events ({node, text}), `state` when it changes, `end` once all is sent."""
    offsets = Offsets.parse(last_event_id)
    shown_state = None
    quiet = 0.0
    yield "retry: 2000\n\n"
    while True:
        state, lines, names = await run_in_threadpool(_tick, root, job_id, offsets)
        if lines:
            batch = [{"node": n, "text": masker.text(t, names)} for n, t in lines]
            yield _event("lines", batch, offsets.token())
            quiet = 0.0
        if state != shown_state:
            yield _event("state", {"state": state})
            shown_state = state
        if State(state).terminal:
            yield _event("end", {"state": state}, offsets.token())
            return
        await asyncio.sleep(interval)
        quiet += interval
        if quiet >= KEEPALIVE_S:  # proxies and browsers drop connections that say nothing
            yield ": keepalive\n\n"
            quiet = 0.0
