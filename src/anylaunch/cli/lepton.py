"""`anylaunch lepton shapes|volumes`: what a Lepton workspace offers."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import click

from anylaunch.cli.output import JSON, emit_json, handles_errors

if TYPE_CHECKING:
    from anylaunch.contract.inputs import NodeGroupArgs


@click.group()
def lepton() -> None:
    """DGX Cloud Lepton workspace: resource shapes and volumes (LEPTON_WORKSPACE_ID,
    LEPTON_AUTH_TOKEN)."""


def _node_group_listing(
    listing: Callable[[NodeGroupArgs], tuple[Any, Iterable[str]]],
) -> click.Command:
    """A `lepton` command listing what the workspace offers, in one node group or all:
    `listing` returns what `--json` prints and the lines printed otherwise."""

    @lepton.command(name=listing.__name__, help=listing.__doc__)
    @click.option("--node-group", help="Only this node group (id or name).")
    @JSON
    @handles_errors
    def command(node_group: str | None, as_json: bool) -> None:
        from anylaunch.contract import commands
        from anylaunch.contract.inputs import NodeGroupArgs

        found, lines = listing(commands.parse(NodeGroupArgs, {"node_group": node_group}))
        if as_json:
            emit_json(found)
            return
        for line in lines:
            click.echo(line)

    return command


@_node_group_listing
def shapes(args: NodeGroupArgs) -> tuple[dict[str, Any], Iterable[str]]:
    """The resource shapes a job can ask for (lepton.resource_shape)."""
    from anylaunch.contract import commands

    table = commands.lepton_shapes(args)
    return table, (
        f"{shape_id}  {shape['gpu_count']}x {shape['instance_type']}  cpu {shape['cpu']}"
        f"  memory {shape['memory_in_mb']} MB  {shape['cluster'] or ''}"
        for shape_id, shape in table.items()
    )


@_node_group_listing
def volumes(args: NodeGroupArgs) -> tuple[list[dict[str, Any]], Iterable[str]]:
    """The shared volumes of the node groups (what mounts can name)."""
    from anylaunch.contract import commands

    found = commands.lepton_volumes(args)
    return found, (
        f"{volume['node_group_id']}  {volume['name']}  {volume['type']}  {volume['from']}"
        f"  -> {volume['mount_path']}"
        for volume in found
    )
