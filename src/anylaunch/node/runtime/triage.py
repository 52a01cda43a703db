"""A Slurm job's own reading of an attempt that failed, inside its allocation: whether
its retry policy retries the failure, and if so the job continues itself (a requeue,
kept off the node the failure was pinned on). See backends/slurm/continuation.py for
why a requeue, and how the node is avoided.

    python3 -I -S anylaunch_job.pyz marks LOGDIR       # each node log's size, before srun
    python3 -I -S anylaunch_job.pyz triage --job-dir DIR --marks MARKS ...   # after srun

It reads the lines this attempt added to each node's log with anylaunch's own rules
(`rules_table`, generated from the diagnosis: the same rule table, one line at a time,
the strongest error line winning by the same precedence). Only a failure a rule names
outright continues the job: a line that merely hints (an exit status, a wrapper) is
left to anylaunch's full diagnosis, which the next anylaunch command runs on the
submitting side and which may still retry it there. A program error is retried only
when `retry.on` names it, as on the submitting side.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

from .rules_table import (
    END_OF_WORK,
    IGNORE,
    LINE_PREFIXES,
    ORDER,
    PREFIX,
    RECORD,
    RULES,
    SHUTDOWN_CLASSES,
    STRONG,
    WARNING,
)

LOG = re.compile(r"^node-(\d+)\.log$")
# Bytes of each node's log read per attempt, from its end: the failure is near the end.
READ_LIMIT = 4 << 20
# Slurm holds a requeued job before it may start again (its begin time is set ahead by
# the credential lifetime, 120 s unless the cluster says otherwise): a shorter backoff is
# already served by that hold.
REQUEUE_HOLD_S = 120
_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")

_RULES = [
    (code, strength, re.compile(pattern, re.IGNORECASE if nocase else 0), words, blames, generic)
    for code, strength, pattern, nocase, words, blames, generic in RULES
]
# (class, strength, blames its node, generic, the rule's place in the table)
Rule = tuple[str, int, bool, bool, int]
_IGNORE = re.compile(IGNORE, re.IGNORECASE)
_PREFIX = re.compile(PREFIX)
_WARNING = re.compile(WARNING)
_RECORD = re.compile(RECORD)
_END_OF_WORK = re.compile(END_OF_WORK, re.IGNORECASE)
_LINE_PREFIXES = [(re.compile(pattern), what) for pattern, what in LINE_PREFIXES]
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_RANK = {code: len(ORDER) - i for i, code in enumerate(ORDER)}


class Found:
    """The failure an attempt's logs name: its class, the node index whose log shows it,
    and whether the rule that named it pins it on that node."""

    def __init__(self, code: str, node: int | None, blames: bool, text: str) -> None:
        self.code, self.node, self.blames, self.text = code, node, blames, text


def rule_of(text: str) -> Rule | None:
    """The rule one line matches (`Rule`), as the
    diagnosis's `rules.classify` finds it (the first strong rule, else the first weak
    one; a generic rule yields to a weak one before it)."""
    if _IGNORE.search(text):
        return None
    body = _PREFIX.sub("", text, count=1)
    lower = text.lower()
    weak = None
    for index, (code, strength, pattern, words, blames, generic) in enumerate(_RULES):
        if words is not None and not any(w in lower for w in words):
            continue
        if pattern.search(text) or (body != text and pattern.search(body)):
            if strength != STRONG:
                weak = weak or (code, strength, blames, generic, index)
            elif generic and weak is not None:
                return weak  # the exception's class alone: the cascade its message names
            else:
                return code, strength, blames, generic, index
    return weak


def classify(logs: list[tuple[int | None, str]]) -> Found | None:
    """The failure named outright in `logs` ((node index, text) each): the strongest
    class among the error lines a strong rule names; None when no such line is found.
    A line a terminal wrapped is read joined with the next, as the diagnosis reads it."""
    best: Found | None = None
    for node, text in logs:
        rows = []  # (line, node, is a warning, its rule)
        for raw in text.splitlines():
            line, where = _ANSI.sub("", raw).strip(), node
            for prefix, what in _LINE_PREFIXES:  # as the diagnosis reads a line
                match = prefix.match(line)
                if match:
                    line = line[match.end() :]
                    where = int(match.group(1)) if what == "node" else where
            line = line.strip()
            if line:
                warning = bool(_WARNING.search(line))
                rows.append((line, where, warning, None if warning else rule_of(line)))
        over = False  # the program said its work was done: a store or peer lost after it
        for i, (line, where, warning, found) in enumerate(rows):  # is the shutdown's
            over = over or bool(_END_OF_WORK.search(line))
            if i + 1 < len(rows):
                found = _wrapped(line, found, rows[i + 1]) or found
            if warning or found is None or found[1] != STRONG:
                continue
            if over and found[0] in SHUTDOWN_CLASSES:
                continue  # training was over: the full diagnosis reads the teardown
            if best is None or _RANK[found[0]] > _RANK[best.code]:
                best = Found(found[0], where, found[2], line)
    return best


def _wrapped(
    line: str, alone: Rule | None, after: tuple[str, int | None, bool, Rule | None]
) -> Rule | None:
    """The rule `line` joined with the next matches, when that one continues it (the
    diagnosis's `findings.find_wrapped`): a strong class neither line names alone, and
    when the line alone is named by a strong rule, only a rule before it in the table."""
    text, _, after_warning, after_alone = after
    named = alone is not None and alone[1] == STRONG and not alone[3]
    if after_warning or not text[:1].islower() or _RECORD.match(text):
        return None
    joined_text = f"{line} {text}"
    if _WARNING.search(joined_text):
        return None
    joined = rule_of(joined_text)
    if joined is None or joined[1] != STRONG or joined[3]:
        return None
    if named and alone is not None and joined[4] >= alone[4]:
        return None
    if any(f is not None and f[0] == joined[0] for f in (alone, after_alone)):
        return None
    return joined


def backoff(first: float, most: float, attempt: int) -> float:
    """The policy's wait before the attempt after `attempt` (observe/diagnose/policy.py)."""
    return min(first * 2 ** max(attempt - 1, 0), most)


def marks(folder: str) -> str:
    """`0:123,1:0`: the size of each node's log now, where this attempt's lines begin."""
    out = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return ""
    for name in names:
        match = LOG.match(name)
        if match:
            try:
                out.append(f"{match.group(1)}:{os.path.getsize(os.path.join(folder, name))}")
            except OSError:
                continue
    return ",".join(out)


def attempt_logs(folder: str, since: str) -> list[tuple[int | None, str]]:
    """What this attempt added to each node's log (`since`: the `marks` before it)."""
    start = {}
    for part in since.split(","):
        index, _, size = part.partition(":")
        if index.isdigit() and size.isdigit():
            start[int(index)] = int(size)
    out: list[tuple[int | None, str]] = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return out
    for name in names:
        match = LOG.match(name)
        if not match:
            continue
        node = int(match.group(1))
        path = os.path.join(folder, name)
        try:
            with open(path, "rb") as handle:
                end = handle.seek(0, os.SEEK_END)
                handle.seek(max(start.get(node, 0), end - READ_LIMIT))
                data = handle.read(READ_LIMIT)
        except OSError:
            continue
        out.append((node, data.decode("utf-8", "replace")))
    return out


def earlier_avoided(job_dir: str) -> list[str]:
    """The nodes earlier attempts were kept off, as the job recorded them."""
    found: list[str] = []
    try:
        with open(os.path.join(job_dir, "attempts.jsonl"), encoding="utf-8") as handle:
            for line in handle:
                try:
                    item = json.loads(line)
                except ValueError:
                    continue
                avoided = item.get("avoided") if isinstance(item, dict) else None
                if isinstance(avoided, list):
                    found += [str(h) for h in avoided if _HOST.match(str(h))]
    except OSError:
        pass
    return found


def _csv(text: str) -> list[str]:
    return [h for h in text.split(",") if _HOST.match(h)]


def _scontrol(*args: str) -> bool:
    try:
        done = subprocess.run(["scontrol", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except OSError as exc:
        say(f"scontrol {args[0]} could not run: {exc}")
        return False
    if done.returncode != 0:
        output = done.stdout.decode("utf-8", "replace").strip()
        say(f"scontrol {' '.join(args)} failed: {output}")
    return done.returncode == 0


def say(text: str) -> None:
    sys.stdout.write(f"anylaunch: {text}\n")
    sys.stdout.flush()


def triage(args: argparse.Namespace) -> int:
    """Continue the job when its policy retries this attempt's failure: 0 when the job
    was requeued (the batch shell then ends), 1 when it ends as it is."""
    attempt, most = args.attempt, args.most
    ended = f"attempt {attempt} of {most} failed (exit code {args.rc})"
    if args.rc == args.hung_rc:
        found: Found | None = Found("HANG", None, False, "stopped by the hang watchdog")
    else:
        found = classify(attempt_logs(os.path.join(args.job_dir, "logs"), args.marks))
    if found is None:
        say(
            f"{ended}; no line names its cause outright, so the job does not continue"
            " itself: the next anylaunch command diagnoses it and applies retry:"
        )
        return 1
    retried = set(args.on.split(","))
    if found.code not in retried:
        say(f"{ended}: {found.code} is not retried ({args.said})")
        return 1
    hosts = _csv(args.nodes)
    blamed = None
    if found.blames and found.node is not None and 0 <= found.node < len(hosts):
        blamed = hosts[found.node]
    avoid = list(dict.fromkeys([*_csv(args.avoided), *earlier_avoided(args.job_dir)]))
    if blamed is not None and blamed not in avoid:
        avoid.append(blamed)
    delay = backoff(args.backoff, args.max_backoff, attempt)
    why = f"{found.code} is retried ({args.said}): attempt {attempt + 1} of {most}"
    if delay:
        why += f" after {delay:g}s"
    if blamed is not None:
        why += f", avoiding {blamed}"
    why += "; the same Slurm job requeued from inside its allocation"
    say(f"{ended}: {why}")
    if not _scontrol("requeue", args.slurm_job_id):
        say("the job could not requeue itself: the next anylaunch command applies retry:")
        return 1
    # Pending again: Slurm lets its owner change where and when it may run next.
    if avoid and not _scontrol(
        "update", f"JobId={args.slurm_job_id}", f"ExcNodeList={','.join(avoid)}"
    ):
        say(f"attempt {attempt + 1} may land on {', '.join(avoid)} again")
    if delay > REQUEUE_HOLD_S:
        _scontrol("update", f"JobId={args.slurm_job_id}", f"StartTime=now+{int(delay)}")
    now = int(time.time())
    diagnosis = {"code": found.code, "node": blamed}
    ended_line = {
        "attempt": attempt,
        "ended_at": now,
        "state": "FAILED",
        "exit_code": args.rc,
        "diagnosis": diagnosis,
        "next": why,
    }
    with open(os.path.join(args.job_dir, "attempts.jsonl"), "a", encoding="utf-8") as out:
        out.write(json.dumps(ended_line) + "\n")
        out.write(json.dumps({"attempt": attempt + 1, "avoided": avoid}) + "\n")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["marks"] and len(argv) == 2:
        print(marks(argv[1]))
        return 0
    parser = argparse.ArgumentParser(prog="anylaunch_job.pyz triage")
    parser.add_argument("--job-dir", required=True)
    parser.add_argument("--slurm-job-id", required=True)
    parser.add_argument("--attempt", type=int, required=True)
    parser.add_argument("--most", type=int, required=True)
    parser.add_argument("--rc", type=int, required=True)
    parser.add_argument("--hung-rc", type=int, default=-1)
    parser.add_argument("--on", required=True, help="the classes retried, comma-separated")
    parser.add_argument("--said", default="retry.on", help="how retry.on reads, for the log")
    parser.add_argument("--backoff", type=float, default=0.0)
    parser.add_argument("--max-backoff", type=float, default=3600.0)
    parser.add_argument("--nodes", default="", help="the attempt's hosts, node 0 first")
    parser.add_argument("--avoided", default="", help="hosts the job was submitted to avoid")
    parser.add_argument("--marks", default="", help="each node log's size before the attempt")
    return triage(parser.parse_args(argv[1:]))
