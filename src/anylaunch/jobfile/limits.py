"""How much one job may ask for, so a typo fails at once instead of running for minutes.

Each limit is far above what a real job needs and says so when it refuses: the job
file's size, the command's length, and the number of nodes (and ranks) per backend,
the local backend's bounded by what this machine can run unless forced.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from anylaunch.errors import ConfigError

if TYPE_CHECKING:
    from anylaunch.jobfile.spec import JobSpec

# AutoModel recipes are a few KiB, and a recipe may carry a list of 150,000 numbers
# (a few MiB written out); a file past this holds data, not settings.
MAX_JOB_FILE_BYTES = 4 << 20
# Values (lines, list items) in one job file: building each costs ~10-20 us, so the tree
# of a few million would take a minute; 150,000 numbers fit with room.
MAX_JOB_FILE_VALUES = 200_000
# Linux refuses any single argument over MAX_ARG_STRLEN (128 KiB), and a shell command
# line reaches the node as one (`bash -c LINE`): longer could never start.
MAX_COMMAND_BYTES = 128 << 10
# Nodes of one job on a shared cluster or cloud: beyond the largest machines in service
# (about 10,000 nodes); a bigger number is a typo that would render for minutes.
MAX_NODES = 10_000
# Parallel splits of one run.
MAX_SPLITS = 10_000
# Processes this machine runs at once for a local job, unless `local.force: true`.
LOCAL_RANKS_PER_CPU = 8
LOCAL_MIN_RANKS = 64


def size(nbytes: int) -> str:
    if nbytes >= 1 << 20:
        return f"{nbytes / (1 << 20):.1f} MiB"
    return f"{nbytes / 1024:.0f} KiB" if nbytes >= 1024 else f"{nbytes} bytes"


def check_command(total: int) -> None:
    """Raise ValueError (the spec's validators turn it into a line of the job file)."""
    if total > MAX_COMMAND_BYTES:
        raise ValueError(
            f"the command is {size(total)}, over the {size(MAX_COMMAND_BYTES)} a program"
            " argument may hold; put it in a script file and run that"
        )


def local_ranks() -> int:
    return max(LOCAL_MIN_RANKS, LOCAL_RANKS_PER_CPU * (os.cpu_count() or 1))


def check_size(spec: JobSpec, backend: str, nodes: int | None, ranks: int | None) -> None:
    """The job's size on `backend`: nodes (and, locally, processes) within the limits."""
    nodes = nodes or 1
    splits = spec.splits if isinstance(spec.splits, int) else len(spec.splits or [])
    for key, count, most, holder in (
        ("nodes", nodes, MAX_NODES, f"any {backend} job can get"),
        ("splits", splits, MAX_SPLITS, "one run may have"),
    ):
        if count > most:
            raise ConfigError(
                f"{count} {key} is more than {holder} (at most {most})",
                file=spec.source,
                key=key,
                fix=f"check the number of {key}",
            )
    if backend == "local" and not (spec.local and spec.local.force):
        total = nodes * (ranks or 1)
        if total > local_ranks():
            raise ConfigError(
                f"{nodes} nodes x {ranks or 1} processes = {total} processes; this machine"
                f" ({os.cpu_count()} CPUs) runs at most {local_ranks()} at once",
                file=spec.source,
                key="nodes",
                fix="lower nodes or gpus_per_node, or set local.force: true to start them anyway",
            )
