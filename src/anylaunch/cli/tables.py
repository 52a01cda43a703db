"""Output for people; imported only by commands that print it."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any

import click

from anylaunch.store import JobRecord

_STYLE = {
    "SUCCEEDED": "green",
    "FAILED": "red",
    "TIMEOUT": "red",
    "PREEMPTED": "yellow",
    "CANCELLED": "yellow",
    "RUNNING": "cyan",
}


def age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def jobs_table(records: Sequence[JobRecord]) -> None:
    """`ps` lists columns the way squeue and docker ps do: plain, aligned, fast.

    rich's Table measures every cell and took 60-120 ms for 50 rows here, more than
    the whole rest of `ps`; an aligned layout of known-width fields needs none of that.
    """
    now = time.time()
    header = ("ID", "NAME", "RUN", "BACKEND", "STATE", "EXIT", "NATIVE", "AGE", "DETAIL")
    rows = [
        (
            r.id,
            r.name if len(r.name) <= 32 else r.name[:31] + "…",
            f"{r.run_id}/{r.split_id}" if r.run_id else "",
            r.backend,
            f"{r.state.value} (stale)" if r.stale else r.state.value,
            "" if r.exit_code is None else str(r.exit_code),
            r.native_id or "",
            age(now - r.created_at),
            r.detail or "",
        )
        for r in records
    ]
    for note in dict.fromkeys(r.stale for r in records if r.stale):
        click.echo(f"anylaunch: {note}", err=True)
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]
    color = sys.stdout.isatty()
    click.echo("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=False)) + "  DETAIL")
    for row in rows:
        cells = [cell.ljust(w) for cell, w in zip(row, widths, strict=False)]
        if color and row[4] in _STYLE:
            cells[4] = click.style(cells[4], fg=_STYLE[row[4]])
        click.echo("  ".join(cells) + "  " + row[-1])


def job_detail(summary: dict[str, Any]) -> None:
    """`status` of one job: its fields, then its state history, as aligned plain lines.

    Printed with click, as `ps` is: importing rich cost `status` more than the rest of
    it did (~40-60 ms).
    """
    color = sys.stdout.isatty()

    def label(text: str) -> str:
        return click.style(text, bold=True) if color else text

    for key in ("id", "name", "backend", "native_id", "state", "exit_code", "detail", "job_dir"):
        if summary.get(key) is not None:
            click.echo(f"{label(f'{key:>10}')}  {summary[key]}")
    if summary.get("source"):
        from anylaunch.observe import source

        click.echo(f"{label('    source')}  {source.line(summary['source'])}")
    start = summary["created_at"]
    click.echo(label("   history"))
    for event in summary["events"]:
        detail = f"  {event['detail']}" if event.get("detail") else ""
        click.echo(f"    +{event['at'] - start:8.1f}s  {event['state']}{detail}")
    attempts = summary.get("attempts") or []
    if len(attempts) > 1 or any(a.get("diagnosis") or a.get("avoided") for a in attempts):
        click.echo(label("  attempts"))
        for line in attempt_lines(attempts):
            click.echo(f"    {line}")
    avoided = attempts[-1].get("avoided") if attempts else None
    if avoided:
        click.echo(f"{label('   avoided')}  {', '.join(avoided)} (where earlier attempts failed)")


def attempt_lines(attempts: list[dict[str, Any]]) -> list[str]:
    """One line per attempt (how it ended, where, its diagnosis), then why the next
    one was made."""
    out = []
    for a in attempts:
        # Ended without a word on how (a run Slurm requeued itself, after a node failure).
        state = a.get("state") or ("running" if a.get("ended_at") is None else "ended, UNKNOWN how")
        code = f" (exit {a['exit_code']})" if a.get("exit_code") is not None else ""
        where = f" on {', '.join(a['nodes'])}" if a.get("nodes") else ""
        diagnosis = a.get("diagnosis") or {}
        said = f": {diagnosis['code']}" if diagnosis.get("code") else ""
        blamed = f" (pinned on {diagnosis['node']})" if diagnosis.get("node") else ""
        out.append(f"#{a['attempt']}  {state}{code}{where}{said}{blamed}")
        if a.get("next"):
            out.append(f"      -> {a['next']}")
    return out
