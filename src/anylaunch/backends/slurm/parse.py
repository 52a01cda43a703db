"""What squeue, sacct and sbatch print, read without running anything.

The command lines are built here too, next to the readers of their output, so the output
recorded from a real cluster for the tests (tests/slurm/recorded/) comes from exactly the
commands a poll runs. Output is read in Slurm's parsable forms (`--parsable2`, `-O` with
a separator) and never from `--json`: 22.05's `sacct --json` reports exit code 0 for
failed jobs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from anylaunch.backends.slurm.states import from_exit_pair, from_wait_status, to_state
from anylaunch.errors import BackendError
from anylaunch.state import State

SQUEUE_FIELDS = ("JobID", "ArrayJobID", "ArrayTaskID", "State", "exit_code", "Reason")
SACCT_FIELDS = ("JobID", "State", "ExitCode")
# %A job id, %F the array's job id, %K the array task id (N/A outside arrays), %k comment.
COMMENT_FORMAT = "%A|%F|%K|%k"
COMMENT_PREFIX = "anylaunch:"


@dataclass(frozen=True)
class Row:
    """One job as squeue or sacct saw it; `exit_code` is already a plain number."""

    native_id: str
    state: str
    exit_code: int | None
    reason: str | None = None


def squeue_argv(native_ids: Sequence[str]) -> list[str]:
    """One squeue for many jobs, finished ones included while slurmctld remembers them
    (MinJobAge); `--array` lists every task of an array on its own line."""
    fields = ",".join(f"{f}:|" for f in SQUEUE_FIELDS)
    return ["squeue", "--noheader", "--array", "--states=all", "--jobs", ",".join(native_ids),
            "--Format", fields]  # fmt: skip


def sacct_argv(native_ids: Sequence[str]) -> list[str]:
    """The accounting record of each job; `--allocations` leaves out its steps."""
    return ["sacct", "--noheader", "--parsable2", "--allocations", "--jobs", ",".join(native_ids),
            "--format", ",".join(SACCT_FIELDS)]  # fmt: skip


def comment_argv() -> list[str]:
    return ["squeue", "--noheader", "--states=all", "--format", COMMENT_FORMAT]


def job_id(stdout: str) -> str:
    """`sbatch --parsable` prints `ID` or `ID;CLUSTER`, possibly after warnings."""
    for line in reversed(stdout.strip().splitlines()):
        head = line.strip().split(";", 1)[0]
        if head.isdigit():
            return head
    raise BackendError(f"sbatch printed no job id: {stdout.strip()!r}", code="SLURM")


def squeue_rows(stdout: str) -> dict[str, Row]:
    """squeue's lines by native id: `<array job>_<task>` for an array's task (as sbatch
    --array ids are recorded), the job id otherwise. `-O Field:|` pads nothing and ends
    every field with `|`; `exit_code` is a wait(2) status there."""
    rows: dict[str, Row] = {}
    for line in stdout.splitlines():
        parts = line.split("|")
        if len(parts) < len(SQUEUE_FIELDS):
            continue
        job, array_job, array_task, state, status, reason = (p.strip() for p in parts[:6])
        native = f"{array_job}_{array_task}" if array_task not in ("", "N/A") else job
        code = from_wait_status(int(status)) if status.isdigit() else None
        rows[native] = Row(native, state, code, reason)
    return rows


def all_forgotten(stderr: str) -> bool:
    """squeue's refusal when none of the listed jobs is known to slurmctld any more
    (`slurm_load_jobs error: Invalid job id specified`, exit status 1)."""
    return "Invalid job id" in stderr


def sacct_rows(stdout: str) -> dict[str, Row]:
    """sacct's lines by JobID; `ExitCode` is `code:signal`. Besides a plain `123` and an
    array task's `123_4`, accounting writes the tasks of an array that have not started
    as one line, `123_[3-5%2]` (ranges, a step, the throttle): each task gets that row.
    A heterogeneous job has a line per component, `123+0`, `123+1`: the job `123` reads
    as its least finished component, or its first that did not complete."""
    rows: dict[str, Row] = {}
    for line in stdout.splitlines():
        parts = line.split("|")
        if len(parts) < len(SACCT_FIELDS):
            continue
        row = Row(parts[0], parts[1], from_exit_pair(parts[2]))
        pending = _PENDING_TASKS.fullmatch(row.native_id)
        if pending is not None:
            for task in _task_ids(pending["tasks"]):
                native = f"{pending['job']}_{task}"
                rows.setdefault(native, Row(native, row.state, row.exit_code))
            continue
        rows[row.native_id] = row
    for native, row in list(rows.items()):
        het, plus, _ = native.partition("+")
        if plus and (het not in rows or _worse(row, rows[het])):  # components in order
            rows[het] = Row(het, row.state, row.exit_code, row.reason)
    return rows


_PENDING_TASKS = re.compile(r"(?P<job>\d+)_\[(?P<tasks>[0-9,:\-]+)(?:%\d+)?\]")


def _task_ids(spec: str) -> list[int]:
    """`1-5`, `1,3,7-9`, `0-15:4` as task ids."""
    out: list[int] = []
    for part in spec.split(","):
        span, _, step = part.partition(":")
        first, _, last = span.partition("-")
        if first.isdigit() and (not last or last.isdigit()) and (not step or step.isdigit()):
            out += range(int(first), int(last or first) + 1, int(step or 1) or 1)
    return out


def _worse(component: Row, chosen: Row) -> bool:
    """Whether a het job's `component` tells more of the whole than `chosen`, the one
    taken so far: a live one over an ended one, a failed one over a completed one."""
    return _rank(component) < _rank(chosen)


def _rank(row: Row) -> int:
    state = to_state(row.state, requeue=False)
    return 0 if not state.terminal else 2 if state is State.SUCCEEDED else 1


def comment_rows(stdout: str, prefix: str = COMMENT_PREFIX) -> dict[str, tuple[str, bool]]:
    """The comment's rest after `prefix` -> (job id, or the array's job id, and whether it
    is an array), for every line whose comment starts with `prefix`. Without `--array`
    an array's unstarted tasks are one line whose task id is a range (`0-2`)."""
    found: dict[str, tuple[str, bool]] = {}
    for line in stdout.splitlines():
        parts = line.strip().split("|", 3)
        if len(parts) == 4 and parts[3].startswith(prefix):
            job, array_job, task, comment = parts
            is_array = task.strip() not in ("", "N/A")
            found.setdefault(comment[len(prefix) :], (array_job if is_array else job, is_array))
    return found
