"""Tables for people (rich); imported only by commands that print one."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

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
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("ID", "NAME", "BACKEND", "STATE", "EXIT", "NATIVE", "AGE", "DETAIL"):
        table.add_column(column, overflow="fold" if column == "DETAIL" else "ellipsis")
    now = time.time()
    for r in records:
        table.add_row(
            r.id,
            r.name,
            r.backend,
            f"[{_STYLE.get(r.state.value, '')}]{r.state.value}[/]"
            if r.state.value in _STYLE
            else r.state.value,
            "" if r.exit_code is None else str(r.exit_code),
            r.native_id or "",
            age(now - r.created_at),
            r.detail or "",
        )
    Console().print(table)


def job_detail(summary: dict[str, Any]) -> None:
    console = Console()
    for key in ("id", "name", "backend", "native_id", "state", "exit_code", "detail", "job_dir"):
        if summary.get(key) is not None:
            console.print(f"[bold]{key:>10}[/]  {summary[key]}", highlight=False)
    start = summary["created_at"]
    console.print("[bold]   history[/]")
    for event in summary["events"]:
        detail = f"  {event['detail']}" if event.get("detail") else ""
        console.print(
            f"    +{event['at'] - start:8.1f}s  {event['state']}{detail}", highlight=False
        )
