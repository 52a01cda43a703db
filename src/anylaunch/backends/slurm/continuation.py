"""A Slurm job that continues itself from inside its allocation: past its time limit,
and after any failure its retry policy retries.

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

After any other failure (srun ended non-zero, attempts remain), the batch shell runs
the in-job runtime's `triage` (node/runtime/triage.py): it reads the lines this attempt
added to each node's log with the diagnosis's own rule table, and when a rule names a
class that `retry.on` retries, the job requeues itself the same way. A failure no rule
names outright (only an exit status speaks) is left as it ended: the next anylaunch
command diagnoses it in full, and its controller (launch/controller.py) makes the next
attempt if the policy retries it. That controller acts only on an attempt whose end no
decision was recorded for, so an attempt the job continued itself is never sent again.

Keeping the next attempt off a node (a GPU Xid, a host memory error, an InfiniBand
error on one node): a running job's ExcNodeList cannot be changed ("Job is no longer
pending execution"), but the requeued job is pending at once, and its owner may update
it then: `triage` asks for the requeue, then `scontrol update JobId=... ExcNodeList=...`
with every node avoided so far, before the batch shell ends (it ignores the SIGTERM
the requeue sends it for that long; Slurm kills what is left only after KillWait). The
list stays with the job through later requeues. Resubmitting with `--exclude` and
`--dependency=afterany:<self>` would do the same at the cost of a new Slurm job id per
attempt, a second copy of the script and of its secrets in the new job's environment,
and a poll that must follow the chain; the requeue keeps all of it in one job.
Slurm's hold on a requeued job (two minutes) serves as the backoff when the policy
asks for less; a longer backoff moves the job's StartTime.

Each run writes what it knows of its attempt to `attempts.jsonl` in the job's folder
(when it started, on which nodes; how it ended and why the next one follows); the
backend reads it when it polls, and `status` shows every attempt. It is the job's own
writing, so it is read as untrusted input (`read`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from anylaunch.node.shell import word
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
_HOST = 200  # characters kept of a host name the job wrote


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


def failure_attempts(spec: JobSpec) -> int | None:
    """How many attempts the job may make in all, when it continues itself after a
    failure its policy retries (a retry policy of two attempts or more, on a job Slurm
    may requeue); else None."""
    retry, section = spec.retry, spec.slurm
    if retry is None or retry.max_attempts < 2 or (section is not None and not section.requeue):
        return None
    return retry.max_attempts


def continues(spec: JobSpec) -> bool:
    """Whether the job continues itself in any way (it then records its attempts)."""
    return bool(max_attempts(spec) or failure_attempts(spec))


def marks_line(runtime_word: str, python: str) -> str:
    """Before srun: where this attempt's lines begin in each node's log."""
    return (
        f'anylaunch_marks=$({word(python)} -I -S {runtime_word} marks "$ANYLAUNCH_JOB_DIR/logs"'
        " 2>/dev/null)"
    )


def failure_lines(
    spec: JobSpec, runtime_word: str, python: str, exclude: list[str], hung_rc: int | None
) -> list[str]:
    """After srun: a failed attempt continues the job when its policy retries the
    failure (triage.py); the batch shell then ends, the job requeued."""
    most = failure_attempts(spec)
    if not most or spec.retry is None:
        return []
    retry = spec.retry
    argv = [
        word(python), "-I", "-S", runtime_word, "triage",
        '--job-dir "$ANYLAUNCH_JOB_DIR" --slurm-job-id "$SLURM_JOB_ID"',
        f'--attempt "$ANYLAUNCH_ATTEMPT" --most {most} --rc "$rc"',
        f"--on {word(','.join(sorted(policy.classes(retry.on))))}",
        f"--said {word(policy.said_of(retry.on))}",
        f"--backoff {retry.backoff:g} --max-backoff {retry.max_backoff:g}",
        '--nodes "$anylaunch_hosts" --marks "${anylaunch_marks:-}"',
    ]  # fmt: skip
    if exclude:
        argv.append(f"--avoided {word(','.join(exclude))}")
    if hung_rc is not None:
        argv.append(f"--hung-rc {hung_rc}")
    return [
        "# A failed attempt: the job requeues itself when retry: retries what its logs name",
        "# (continuation.py); the requeue's SIGTERM waits until that is recorded.",
        f'if [ "$rc" != 0 ] && [ -z "${{continue_pid:-}}" ] && [ "$ANYLAUNCH_ATTEMPT" -lt {most} ]'
        f" && [ -f {runtime_word} ]; then",
        "  trap '' TERM",
        f'  {" ".join(argv)} && exit "$rc"',
        "  trap - TERM",
        "fi",
    ]


def start_lines() -> list[str]:
    """The batch shell's record of the attempt it runs."""
    return [
        "# This attempt, as the job records it for `anylaunch status` (see continuation.py).",
        'anylaunch_nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST" 2>/dev/null'
        " | sed 's/.*/\"&\"/' | paste -sd, -)",
        'anylaunch_hosts=$(scontrol show hostnames "$SLURM_JOB_NODELIST" 2>/dev/null'
        " | paste -sd, -)",
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
        for key in ("nodes", "avoided"):
            hosts = item.get(key)
            if isinstance(hosts, list):
                one[key] = [str(n)[:_HOST] for n in hosts[:MAX_HOSTS]]
        if item.get("state") in {s.value for s in State}:
            one["state"] = State(item["state"])
        said = item.get("diagnosis")
        code = said.get("code") if isinstance(said, dict) else None
        if code in BY_CODE:
            known = BY_CODE[code]
            keys = ("code", "err_class", "retryable", "cause", "suggestion")
            node = said.get("node") if isinstance(said, dict) else None
            named = str(node)[:_HOST] if isinstance(node, str) and node else None
            one["diagnosis"] = {**{k: getattr(known, k) for k in keys}, "node": named}
    return tuple(found[n] for n in sorted(found))
