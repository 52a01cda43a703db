"""A Slurm job that continues itself past its time limit, from inside its allocation.

With `retry:` allowing another attempt after a time limit (TIME_LIMIT among the classes
it retries), the batch shell, once the early signal has reached the ranks (they save a
checkpoint), requeues its own job a few seconds before the limit (`scontrol requeue`).
Nothing of ours has to stay alive on the login node, and it does not depend on the
cluster's preemption mode: a requeue asked for by the job's owner is allowed for a job
submitted with `--requeue`, which every time-limited script is.

Why requeue rather than resubmit with a dependency on itself: a requeue keeps the job
id, so every `squeue`, `sacct` and anylaunch record of the job stays the one job;
Slurm counts the runs (SLURM_RESTART_COUNT, from which ANYLAUNCH_ATTEMPT is
computed); the output file is opened again for the next run and, with
`--open-mode=append` (always in our scripts), every run's output follows the last one's
instead of replacing it; `sacct` shows the latest run and, with `--duplicates`, each
earlier one as REQUEUED. The cost: Slurm holds a requeued job back before it may start
again (its begin time is set about two minutes ahead, the credential lifetime).

Each run writes what it knows of its attempt to `attempts.jsonl` in the job's folder
(when it started, on which nodes; how it ended and why the next one follows); the
backend reads it when it polls, and `status` shows every attempt. It is the job's own
writing, so it is read as untrusted input (`read`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from anylaunch.observe.diagnose import policy
from anylaunch.observe.diagnose.classes import BY_CODE
from anylaunch.state import State

if TYPE_CHECKING:
    from anylaunch.jobfile.spec import JobSpec
    from anylaunch.store import JobRecord

FILE = "attempts.jsonl"
# The requeue is asked for this long before the time limit: the ranks had the early
# signal `signal_lead` seconds before it to save a checkpoint.
MARGIN_S = 3
_LIMIT = 1 << 18  # bytes of the file read: a job's own writing must stay small
_KEYS = ("started_at", "ended_at", "exit_code", "next")


def max_attempts(spec: JobSpec) -> int | None:
    """How many attempts the job may make in all, when a time limit is continued inside
    the job (its retry policy retries TIME_LIMIT and allows a second attempt); else None."""
    retry, section = spec.retry, spec.slurm
    if retry is None or retry.max_attempts < 2 or section is None:
        return None
    if not (section.time and section.signal):
        return None
    if "TIME_LIMIT" not in policy.classes(retry.on):
        return None
    return retry.max_attempts


def start_lines() -> list[str]:
    """The batch shell's record of the attempt it runs."""
    return [
        "# This attempt, as the job records it for `anylaunch status` (see continuation.py).",
        'anylaunch_nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST" 2>/dev/null'
        " | sed 's/.*/\"&\"/' | paste -sd, -)",
        'echo "{\\"attempt\\": $ANYLAUNCH_ATTEMPT, \\"started_at\\": $(date +%s),'
        f' \\"nodes\\": [$anylaunch_nodes]}}" >> "$ANYLAUNCH_JOB_DIR/{FILE}"',
    ]


def continue_lines(most: int) -> list[str]:
    """A shell function, `continue_job`, that the early signal's trap calls: unless this
    is the last attempt, the job requeues itself MARGIN_S seconds before its limit."""
    why = (
        "TIME_LIMIT is retried: attempt $(( ANYLAUNCH_ATTEMPT + 1 )) of"
        f" {most}, the same Slurm job requeued from inside its allocation"
    )
    ended = (
        '{\\"attempt\\": $ANYLAUNCH_ATTEMPT, \\"ended_at\\": $(date +%s), \\"state\\":'
        ' \\"TIMEOUT\\", \\"diagnosis\\": {\\"code\\": \\"TIME_LIMIT\\"}, \\"next\\":'
        f' \\"{why}\\"}}'
    )
    return [
        "continue_job() {",
        f'  [ "$ANYLAUNCH_ATTEMPT" -lt {most} ] || return 0',
        f'  echo "anylaunch: attempt $ANYLAUNCH_ATTEMPT of {most} continues: the job requeues'
        f' itself {MARGIN_S}s before the time limit"',
        f"  ( wait_s=$(( ANYLAUNCH_DEADLINE - $(date +%s) - {MARGIN_S} ))",
        '    [ "$wait_s" -gt 0 ] && sleep "$wait_s"',
        f'    echo "{ended}" >> "$ANYLAUNCH_JOB_DIR/{FILE}"',
        '    scontrol requeue "$SLURM_JOB_ID" ) &',
        "  continue_pid=$!",
        "}",
    ]


def end_lines() -> list[str]:
    """After srun: a program that finished its work (exit 0) is not requeued."""
    return [
        'if [ -n "${continue_pid:-}" ]; then',
        '  if [ "$rc" = 0 ]; then kill "$continue_pid" 2>/dev/null; else wait "$continue_pid"; fi',
        "fi",
    ]


def read(job: JobRecord) -> tuple[dict[str, Any], ...]:
    """The attempts the job recorded of itself, merged by number (later lines win),
    oldest first; () when it recorded none or the file cannot be read."""
    from anylaunch.observe.jobfiles import read_inside
    from anylaunch.store.attempts import MAX_HOSTS

    try:
        text = read_inside(job.job_dir, FILE, limit=_LIMIT).decode("utf-8", "replace")
    except (OSError, ValueError):
        return ()
    found: dict[int, dict[str, Any]] = {}
    for line in text.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        number = item.get("attempt") if isinstance(item, dict) else None
        if not isinstance(number, int) or isinstance(number, bool) or not 1 <= number <= 100:
            continue
        one = found.setdefault(number, {"attempt": number})
        for key in _KEYS:
            value = item.get(key)
            if isinstance(value, int | float | str) and not isinstance(value, bool):
                one[key] = str(value)[:500] if key == "next" else value
        nodes = item.get("nodes")
        if isinstance(nodes, list):
            one["nodes"] = [str(n)[:200] for n in nodes[:MAX_HOSTS]]
        if item.get("state") in {s.value for s in State}:
            one["state"] = State(item["state"])
        said = item.get("diagnosis")
        code = said.get("code") if isinstance(said, dict) else None
        if code in BY_CODE:
            known = BY_CODE[code]
            keys = ("code", "err_class", "retryable", "cause", "suggestion")
            one["diagnosis"] = {**{k: getattr(known, k) for k in keys}, "node": None}
    return tuple(found[n] for n in sorted(found))
