"""The `anylaunch` command: a thin layer over the Python API (`anylaunch.api`) and the
commands shared with the MCP server (`anylaunch.contract.commands`).

Only click is imported at start-up; each command imports what it needs when it runs, so
`anylaunch --help` costs little more than Python itself.
"""

from __future__ import annotations

import sys

import click

from anylaunch.cli import jobs, lepton, live, run, schema, serve
from anylaunch.cli.output import emit_json
from anylaunch.errors import EXIT_USAGE


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="anylaunch")
def cli() -> None:
    """Launch GPU training jobs anywhere from one job file: locally with torchrun, on
    Slurm, through SkyPilot, or on DGX Cloud Lepton.

    \b
    anylaunch run train.yaml              run and wait (exit 0 only if it succeeded)
    anylaunch run train.yaml --dry-run    print the exact plan, run nothing
    anylaunch ps                          recent jobs
    anylaunch logs JOB -f                 follow a job's output
    """


for command in (
    run.run, run.retry, run.preflight, jobs.ps, jobs.status, jobs.logs, jobs.cancel,
    jobs.diagnose, live.exec_, live.shell, live.forward, live.stack, serve.ui, serve.mcp,
    lepton.lepton, schema.schema,
):  # fmt: skip
    cli.add_command(command)


def main() -> None:
    """Entry point: usage errors exit 2, as the contract says, also with --json."""
    try:
        cli.main(standalone_mode=False)
    except click.UsageError as exc:
        if "--json" in sys.argv[1:]:
            from anylaunch.errors import error_json

            emit_json(error_json("USAGE", exc.format_message()))
        else:
            exc.show()
        sys.exit(EXIT_USAGE)
    except click.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
