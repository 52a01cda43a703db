"""The long-running commands the user starts on purpose: the dashboard (`ui`) and the
MCP server (`mcp`)."""

from __future__ import annotations

import click

from anylaunch.cli.output import handles_errors


@click.command()
@click.option("--port", type=int, default=8471, show_default=True, help="0 picks a free port.")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Another address serves beyond this machine, behind a printed access token.",
)
@handles_errors
def ui(port: int, host: str) -> None:
    """Serve a web dashboard of jobs and runs until interrupted: live logs, timelines,
    diagnosis, cancel and retry (the same code paths as these commands)."""
    from anylaunch.errors import UsageError

    try:
        from anylaunch.ui.server import serve
    except ImportError as exc:
        raise UsageError(f"the dashboard needs {exc.name} — pip install 'anylaunch[ui]'") from None
    try:
        serve(host=host, port=port)
    except OSError as exc:
        raise UsageError(
            f"ui: cannot serve on {host}:{port}: {exc.strerror} — try --port 0"
        ) from None


@click.command()
@click.option(
    "--read-only", is_flag=True, help="Offer only the tools that read (no run, cancel, retry)."
)
@handles_errors
def mcp(read_only: bool) -> None:
    """Serve anylaunch to a coding agent over stdio (Model Context Protocol).

    \b
    Add it to an agent's MCP configuration, e.g.:
      {"mcpServers": {"anylaunch": {"command": "anylaunch", "args": ["mcp"]}}}
    """
    from anylaunch.errors import UsageError

    try:
        from anylaunch.mcp.server import serve
    except ImportError as exc:
        raise UsageError(
            f"the MCP server needs {exc.name} — pip install 'anylaunch[mcp]'"
        ) from None
    serve(read_only=read_only)
