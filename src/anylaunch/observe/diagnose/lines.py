"""Log lines with the node and rank they came from.

Lines carry their origin in prefixes, depending on who wrote them: anylaunch's merged
logs (`[node 1] `), PyTorch's distributed logging (`[rank3]:`), torchrun's `--tee`
(`[default3]:`, the local rank), srun's `--label` (`3: `) and SkyPilot
(`(head, rank=0, pid=123) `, `(worker1, rank=1, pid=9) `).

A line is also a warning or an error: warnings (Python's `UserWarning: ...`, glog's
`W1218 ...`, c10d's `[W socket.cpp:601]`, NCCL INFO) never decide a diagnosis while an
error line is present, whatever words they contain.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NODE = re.compile(r"^\[node (\d+)\] ?")
# What log collectors put before every line of a program's output, so a log pasted from
# them reads as the program printed it: `kubectl logs --prefix` ("[pod/NAME/CONTAINER] "),
# an RFC 3339 time (`kubectl logs --timestamps`, `docker logs -t`, CI runners' raw logs),
# `docker compose logs` ("trainer-1  | "), syslog and journald ("May  1 12:00:00 host
# kernel: "), and the kernel's own time since boot (dmesg's "[  199.234935] ").
_KUBECTL = re.compile(r"^\[pod/[\w.-]+/[\w.-]+\] ")
_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d) ")
_COMPOSE = re.compile(r"^[\w.-]+[-_]\d+\s+\| ")
_SYSLOG = re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [\w.-]+ [\w./@-]+(?:\[\d+\])?: ")
_DMESG = re.compile(r"^\[ *\d+\.\d{6}\] ")
# a time in brackets before everything else, in any script's brackets ("【2025-08-21 11:48:44】")
_BRACKET_STAMP = re.compile(r"^[\[【]\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[^\]】]{0,20}[\]】] ?")
# A paste that begins mid-line may have lost the bracket before it ("rank4]: ...").
_RANK = re.compile(r"^(?:\[rank(\d+)\]:?|rank(\d+)\]:)\s?")
_TEE = re.compile(r"^\[default(\d+)\]:")
# A training framework's logger naming the rank in its own prefix ("[olmo.util:623,
# rank=0] ...")
_LOGGER_RANK = re.compile(r"^\[[\w.:-]+, rank=(\d+)\] ")
_SRUN = re.compile(r"^(\d{1,5}): ")
_SKY = re.compile(r"^\((?:head|worker\d*|[\w.-]+), rank=(\d+), pid=\d+\) ")
# Ray's prefix on an actor's or a task's output names a process, not a rank.
_RAY = re.compile(r"^\([\w./-]+ pid=\d+(?:, ip=[\w.:-]+)?\) ")
# c10d's ProcessGroupNCCL names the rank that prints in its own message
# ("[Rank 3] Watchdog caught ...", "[PG ID 0 PG GUID 0(default_pg) Rank 3] ...").
_C10D_RANK = re.compile(r"\[(?:PG [^\]]*?)?Rank (\d+)\]|\baborted on rank (\d+)\b")
# The prefixes launchers put before a line, outermost first, and what each one numbers.
# srun --label numbers tasks, which are ranks under launcher: srun.
_PREFIXES: tuple[tuple[re.Pattern[str], str | None], ...] = (
    (_NODE, "node"),
    (_KUBECTL, None),
    (_STAMP, None),
    (_COMPOSE, None),
    (_SYSLOG, None),
    (_DMESG, None),
    (_BRACKET_STAMP, None),
    (_RAY, None),
    (_SKY, "rank"),
    (_SRUN, "rank"),
    (_RANK, "rank"),
    (_LOGGER_RANK, "rank"),
    (_TEE, "local"),
)
# c10d prints each address it could not bind at warning level, then fails with a line
# that says only "on any local network address": a warning naming a socket call's errno
# is the reason of the error that follows, so it is read as an error line.
_ERRNO = r"(?!.*\(errno: \d+ - )"
_WARNING = re.compile(
    r"\b[A-Z]\w*Warning: |^\[?W\d{3,4} \d\d:"
    + _ERRNO
    + r"|^\[W [\w./-]+:\d+\]"
    + _ERRNO
    # a logger's warning that an operation failed with an error names that error
    + r"|^(WARNING|WARN)\b(?!.*\bdue to an error of type \w+)|\[WARNING\]"
    r"| - WARNING - |\bwarnings\.warn\(|\bNCCL INFO\b|^\[?I\d{3,4} \d\d:|^INFO\b|^\[I [\w./-]+:\d+\]"
)


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_QUOTE = re.compile(r"^\s*(?:>\s?)+")  # a log pasted into a Markdown quote
_EMPHASIS = re.compile(
    r"^(\s*)(\*\*|__)(\S(?:(?:(?!\*\*|__).)*\S)?)\2\s*$"
)  # a pasted line in bold
# A pasted line set as inline code, or a code fence's own line ("```log").
_CODE = re.compile(r"^\s*```[\w+-]*\s*$|^(\s*)`+(?=\S)(.*?)`*\s*$")


def _clean(raw: str) -> str:
    """The line without colour codes, quote markers or emphasis, which no emitter's text has."""
    line = _EMPHASIS.sub(r"\1\3", _QUOTE.sub("", _ANSI.sub("", raw)))
    return _CODE.sub(r"\1\2", line).rstrip()


def is_warning(text: str) -> bool:
    """A warning or an informational line: evidence only when no error line is found."""
    return bool(_WARNING.search(text))


@dataclass(frozen=True)
class LogLine:
    text: str
    lineno: int
    node: int | None = None
    rank: int | None = None
    local_rank: int | None = None
    source: str = "log"

    def where(self) -> str:
        parts = []
        if self.rank is not None:
            parts.append(f"rank {self.rank}")
        elif self.local_rank is not None:
            parts.append(f"local rank {self.local_rank}")
        if self.node is not None:
            parts.append(f"node {self.node}")
        return ", ".join(parts)


def _hard_wrap_width(lines: list[str]) -> int | None:
    """The width a terminal or a copy broke every long line at, if it did: two or more
    lines of exactly the longest length, one of them ending in the middle of a word
    ("... Due to the asynchr" / "onous nature of CUDA kernels ...")."""
    width = max(map(len, lines), default=0)
    if width < 60:
        return None
    ends = [i for i, line in enumerate(lines[:-1]) if len(line) == width]
    cut = any(
        lines[i][-1:].isalnum() and lines[i + 1][:1].isalnum() and lines[i + 1][:1].islower()
        for i in ends
    )
    return width if len(ends) >= 2 and cut else None


def parse(text: str, *, node: int | None = None, source: str = "log") -> list[LogLine]:
    out = []
    cleaned = [_clean(raw) for raw in text.splitlines()]
    width = _hard_wrap_width(cleaned)
    before: dict[str, int | None] = {}
    for lineno, line in enumerate(cleaned, 1):
        found: dict[str, int | None] = {"node": node, "rank": None, "local": None}
        prefixed = False
        for prefix, what in _PREFIXES:
            match = prefix.match(line)
            if match:
                if what is not None:
                    found[what] = int(next(g for g in match.groups() if g is not None))
                line = line[match.end() :]
                prefixed = True
        if width and lineno > 1 and len(cleaned[lineno - 2]) == width and not prefixed:
            found = dict(before)  # the rest of the line before, which the wrap cut off
        before = found
        if found["rank"] is None and (named := _C10D_RANK.search(line)):
            found["rank"] = int(named.group(1) or named.group(2))
        if line.strip():
            out.append(
                LogLine(line.strip(), lineno, found["node"], found["rank"], found["local"], source)
            )
    return out


# The line that opens a later attempt's part of a node's log, when one log holds every
# attempt of a job (a local job's node logs, a Lepton job's joined logs, a Slurm job's
# files): `--- anylaunch: attempt 2 ...`.
ATTEMPT_MARK = "--- anylaunch: attempt"
_MARK = re.compile(r"^(?:\[node \d+\] ?)?--- anylaunch: attempt (\d+)\b")


def attempt_mark(number: int, note: str = "") -> str:
    return f"{ATTEMPT_MARK} {number}{f' ({note})' if note else ''} ---"


def attempt_lines(lines: list[str], number: int, first: int = 1) -> list[str]:
    """The lines of attempt `number` in a log that holds a job's attempts from `first`
    on, each later one opened by its mark."""
    out: list[str] = []
    current = first
    for line in lines:
        match = _MARK.match(line)
        if match:
            current = int(match.group(1))
            continue
        if current == number:
            out.append(line)
    return out
