"""The long-running commands the user starts on purpose: the dashboard (`ui`), the
MCP server (`mcp`) and the Lepton emulator."""

from __future__ import annotations

import json

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


@click.command("lepton-emulator")
@click.option("--port", type=int, default=0, show_default=True, help="0 picks a free port.")
@click.option("--host", default="127.0.0.1", show_default=True, help="A loopback address.")
@click.option("--workspace", default="ws-emulator", show_default=True)
@click.option("--token", envvar="LEPTON_EMULATOR_TOKEN", help="Accepted token (default: random).")
@click.option("--state-dir", type=click.Path(file_okay=False), help="Replica files (default: tmp).")
@click.option("--fault", "faults", multiple=True, metavar="JSON", help="A fault to switch on.")
@click.option(
    "--outside",
    multiple=True,
    metavar="HOST:PORT",
    help="A loopback endpoint jobs may reach (e.g. the S3 server); repeatable.",
)
@handles_errors
def lepton_emulator(
    port: int,
    host: str,
    workspace: str,
    token: str | None,
    state_dir: str | None,
    faults: tuple,
    outside: tuple,
) -> None:
    """Serve a local emulator of the DGX Cloud Lepton job API until interrupted.

    Prints one JSON line with the workspace URL; point a client at it with
    LEPTON_WORKSPACE_URL, LEPTON_WORKSPACE_ID and LEPTON_AUTH_TOKEN.
    """
    import secrets
    import tempfile
    from pathlib import Path

    from anylaunch.errors import UsageError

    try:
        from anylaunch.lepton_emulator.server import serve
    except ImportError as exc:
        raise UsageError(
            f"the emulator needs {exc.name} — pip install 'anylaunch[lepton-emulator]'"
        ) from None
    if token is None:
        token = "emu-" + secrets.token_hex(12)
        click.echo(f"token: {token}", err=True)
    try:
        parsed = [json.loads(f) for f in faults]
        serve(
            host=host,
            port=port,
            workspace=workspace,
            token=token,
            state_dir=Path(state_dir or tempfile.mkdtemp(prefix="lepton-emu-")),
            faults=parsed,
            outside=outside,
        )
    except (ValueError, OSError) as exc:
        raise UsageError(f"lepton-emulator: {exc}") from None
