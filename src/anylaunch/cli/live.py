"""`exec`, `shell`, `forward` and `stack`: reaching a job while it runs."""

from __future__ import annotations

import sys

import click

from anylaunch.cli.output import JSON, emit_json, handles_errors, note

NODE = click.option(
    "--node", "-N", type=click.IntRange(min=0), default=0, show_default=True, help="The node."
)


@click.command("exec")
@click.argument("job_id")
@NODE
@click.option(
    "--timeout", "timeout_s", type=float, default=60.0, show_default=True,
    help="With --json: stop the command after this many seconds.",
)  # fmt: skip
@JSON
@click.argument("command", nargs=-1, required=True)
@handles_errors
def exec_(
    job_id: str, node: int, timeout_s: float, as_json: bool, command: tuple[str, ...]
) -> None:
    """Run a command on a node of a running job, in the node's environment and folder:

    \b
    anylaunch exec JOB --node 1 -- printenv NODE_RANK

    Its output is masked (the job's secrets never print) and its exit status is this
    command's. With --json: no input, and its output comes back in one object."""
    from anylaunch.contract import commands
    from anylaunch.contract.inputs import ExecArgs

    if as_json:
        args = commands.parse(
            ExecArgs,
            {"job_id": job_id, "node": node, "command": list(command), "timeout_s": timeout_s},
        )
        emit_json(commands.exec_command(args))
        return
    from anylaunch.observe import live

    sys.exit(live.exec_stream(job_id, node, list(command)))


@click.command()
@click.argument("job_id")
@NODE
@handles_errors
def shell(job_id: str, node: int) -> None:
    """An interactive shell on a node of a running job, in the node's environment and
    folder (with a terminal when this one is). Exit the shell to return."""
    from anylaunch.observe import live

    sys.exit(live.shell(job_id, node, note=note))


@click.command()
@click.argument("job_id")
@click.argument("port", type=click.IntRange(1, 65535))
@NODE
@click.option(
    "--local-port", type=click.IntRange(0, 65535),
    help="The port on 127.0.0.1 here (default: PORT; 0: any free one).",
)  # fmt: skip
@JSON
@handles_errors
def forward(job_id: str, port: int, node: int, local_port: int | None, as_json: bool) -> None:
    """Serve PORT of a node of a running job on 127.0.0.1 here, until Ctrl-C:

    \b
    anylaunch forward JOB 6006 --local-port 16006   # TensorBoard at http://127.0.0.1:16006/
    """
    from anylaunch.contract import commands
    from anylaunch.observe.relay import Forward

    opened = Forward(job_id, node, port, local_port)
    result = commands.forwarded(opened, None)
    if opened.here:
        if as_json:
            emit_json(result)
        else:
            click.echo(
                f"job {opened.job_id} node {node}: port {port} is already on this machine"
                f" ({opened.relay.via}): {opened.url}"
            )
        return
    if as_json:
        emit_json(result)
    else:
        click.echo(
            f"job {opened.job_id} node {node} port {port} -> {opened.url}"
            f" ({opened.relay.via}); Ctrl-C to stop"
        )
    sys.stdout.flush()
    try:
        opened.serve()
    except KeyboardInterrupt:
        pass
    finally:
        opened.close()


@click.command()
@click.argument("job_id")
@click.option("--node", "-N", type=click.IntRange(min=0), help="Only this node's ranks.")
@JSON
@handles_errors
def stack(job_id: str, node: int | None, as_json: bool) -> None:
    """The Python stack of every rank of a running job, by rank (py-spy), secrets masked."""
    from anylaunch.contract import commands
    from anylaunch.contract.inputs import StackArgs
    from anylaunch.observe import live

    result = commands.stack(commands.parse(StackArgs, {"job_id": job_id, "node": node}))
    if as_json:
        emit_json(result)
    else:
        click.echo(live.stack_text(result), nl=False)
