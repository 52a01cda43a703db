"""`anylaunch schema COMMAND`: the JSON Schema of a command's `--json` output."""

from __future__ import annotations

import click

from anylaunch.cli.output import handles_errors


@click.command()
@click.argument("command", nargs=-1)
@click.option("--list", "show_list", is_flag=True, help="Name every schema.")
@handles_errors
def schema(command: tuple[str, ...], show_list: bool) -> None:
    """Print the JSON Schema of COMMAND's --json output (`error` for errors, `mcp TOOL` for
    an MCP tool's result)."""
    from anylaunch.cli.schemas import all_schemas, render
    from anylaunch.errors import UsageError

    files = all_schemas()
    names = sorted(name.removesuffix(".json").replace("/", " ") for name in files)
    if show_list:
        click.echo("\n".join(names))
        return
    wanted = " ".join(command)
    key = ("mcp/" + wanted[4:] if wanted.startswith("mcp ") else wanted.replace(" ", "-")) + ".json"
    if key not in files:
        raise UsageError(
            f"no schema for '{wanted}' — use one of: {', '.join(names)}"
            if wanted
            else "name a command — for example: anylaunch schema status"
        )
    click.echo(render(files[key]), nl=False)
