"""What every command prints the same way: `--json`, one-line errors and their exit
status, notes and warnings on stderr."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

import click

from anylaunch.errors import AnylaunchError

JSON = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


def emit_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, default=str))


def handles_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Errors become one line (or `{"error": ...}` with --json) and the right exit status."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except AnylaunchError as exc:
            if kwargs.get("as_json"):
                emit_json(exc.to_json())
            else:
                click.echo(f"anylaunch: error: {exc.message}", err=True)
            sys.exit(exc.exit_status)

    return wrapper


def note(text: str) -> None:
    click.echo(text, err=True)


def warn_check(check: Any) -> None:
    fix = f" — {check.fix}" if check.fix else ""
    click.echo(f"anylaunch: warning: {check.name}: {check.message}{fix}", err=True)


def show_workflow(summary: dict[str, Any], as_json: bool) -> None:
    from anylaunch.workflow import commands as wf

    if as_json:
        emit_json(summary)
    else:
        click.echo("\n".join(wf.lines(summary)))
