"""Argument checks the CLI makes without pydantic, for the commands people run most.

`ps` and `status` of one job spend most of their time importing pydantic, only to check
a job id's length or a limit's sign; a dry-run needs pydantic for the job file, but not
to build a model of its command line. These functions say whether arguments are *plainly*
valid under the models of `contract.inputs`. Whatever they do not pass is handed to the
model, which accepts it or refuses it with its own message, so the rule and its wording
stay the model's: these checks may refuse more than the model, never accept more
(tests/agents/test_quick_args.py holds them to that at each boundary).
"""

from __future__ import annotations

from collections.abc import Sequence

MAX_ID = 64  # the longest job, run or workflow id an argument may carry
STATES = frozenset(
    ("PENDING", "STARTING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "TIMEOUT",
     "PREEMPTED", "UNKNOWN")
)  # fmt: skip


def plain_id(text: object) -> bool:
    """A job id (or run id, or prefix) as `RunOrJobRef.id` and `JobId` take it."""
    return isinstance(text, str) and 1 <= len(text) <= MAX_ID


def plain_job_file(
    file: object, backend: object, overrides: Sequence[object], command: Sequence[object]
) -> bool:
    """`DryRunArgs` given a path: text for the path, the backend, each override and word."""
    return (
        type(file) is str
        and (backend is None or type(backend) is str)
        and all(type(o) is str for o in overrides)
        and all(type(w) is str for w in command)
    )


def plain_ps(limit: object, states: Sequence[object], backend: object) -> bool:
    """`PsArgs`: a limit >= 1 or none, known state names, a backend name or none."""
    return (
        (limit is None or (type(limit) is int and limit >= 1))
        and all(isinstance(s, str) and s in STATES for s in states)
        and (backend is None or type(backend) is str)
    )
