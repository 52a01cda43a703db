"""How much one job may ask for, so a typo fails at once instead of running for minutes.

Each limit is far above what a real job needs and says so when it refuses: the job
file's size, the command's length, and the number of nodes and splits (checked when the
job is resolved for its backend, which may add a limit of its own).
"""

from __future__ import annotations

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
