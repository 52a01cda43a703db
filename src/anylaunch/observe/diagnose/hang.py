"""A hang, as the hang watchdog reports it in the job's log before it stops the job.

The watchdog writes one line, then every rank's Python stack as py-spy's `dump` prints
it, each rank's preceded by a line naming it:

    anylaunch: hang: no rank wrote output for 600s; the Python stack of every rank follows
    anylaunch: hang: rank 2 (node 1, pid 4242)
    Process 4242: /usr/bin/python3 -u train.py
    Python v3.11.7 (/usr/bin/python3.11)

    Thread 4242 (idle): "MainThread"
        wait_for_data (train.py:12)
        <module> (train.py:30)

py-spy prints the innermost frame first: where each rank's main thread waits. The
stacks are the evidence, not messages: their lines are never read by the rules (a
frame in `_store_based_barrier` is not a rendezvous failure). A rank py-spy could not
read has one line instead of its dump, why (`py-spy: Permission denied ...`); its rank
or node is `?` when its process did not say.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from anylaunch.observe.diagnose.lines import LogLine

HEADER = re.compile(
    r"^anylaunch: hang: no rank wrote output for (\d+)s; the Python stack of every rank follows$"
)
RANK = re.compile(r"^anylaunch: hang: rank (\d+|\?) \(node (\d+|\?), pid (\d+)\)$")
NO_RANK = re.compile(r"^anylaunch: hang: no rank process found")
# py-spy dump's lines: the process, the interpreter, each thread, its frames (with
# --locals, the arguments and locals under each frame).
_PROCESS = re.compile(r"^Process \d+: ")
_PYTHON = re.compile(r"^Python v\d")
THREAD = re.compile(r'^Thread (\S+) \(([\w+]+)\): "(.*)"$')
FRAME = re.compile(r"^(.+) \(([^()]*):(\d+)\)$")
_LOCALS_HEADER = re.compile(r"^(Arguments|Locals):$")
_LOCAL = re.compile(r"^\w+: ")
MAIN_THREAD = "MainThread"


@dataclass(frozen=True)
class RankStack:
    rank: int | None
    node: int | None
    pid: int
    # The innermost frame of the main thread as a line of its own, or why there is none.
    frame: LogLine | None


@dataclass
class Hang:
    seconds: int
    header: LogLine
    ranks: list[RankStack] = field(default_factory=list)
    block: set[int] = field(default_factory=set)  # indices of the report's lines

    def frames(self) -> list[LogLine]:
        """One line per rank: its innermost frame, with its rank and node."""
        return [stack.frame for stack in self.ranks if stack.frame is not None]

    def odd_one(self) -> RankStack | None:
        """The one rank waiting somewhere else than all the others (with three ranks or
        more): most often the rank the others wait for."""
        where: dict[str | None, list[RankStack]] = {}
        for stack in self.ranks:
            where.setdefault(stack.frame.text if stack.frame else None, []).append(stack)
        alone = [group[0] for group in where.values() if len(group) == 1]
        return alone[0] if len(self.ranks) >= 3 and len(where) == 2 and len(alone) == 1 else None


def read(lines: Sequence[LogLine]) -> Hang | None:
    """The watchdog's report in `lines`, if there is one (the last, if several)."""
    starts = [i for i, line in enumerate(lines) if HEADER.match(line.text)]
    if not starts:
        return None
    start = starts[-1]
    hang = Hang(int(HEADER.match(lines[start].text).group(1)), lines[start], block={start})  # type: ignore[union-attr]
    current: tuple[int | None, int | None, int] | None = None
    frame: LogLine | None = None
    in_main = in_locals = False
    after_rank = False  # the line after a rank's header: its dump, or why there is none
    for i in range(start + 1, len(lines)):
        line = lines[i]
        text = line.text
        rank = RANK.match(text)
        if rank:
            _close(hang, current, frame)
            current, frame, in_main = (
                (_number(rank[1]), _number(rank[2]), int(rank[3])),
                None,
                False,
            )
            after_rank = True
            hang.block.add(i)
            continue
        if thread := THREAD.match(text):
            in_main = thread[3] == MAIN_THREAD
        elif FRAME.match(text):
            if in_main and frame is None and current is not None:
                frame = LogLine(text, line.lineno, current[1], current[0], None, line.source)
        elif _LOCALS_HEADER.match(text):
            in_locals = True
            hang.block.add(i)
            continue
        elif after_rank and current is not None and not _PROCESS.match(text):
            frame = LogLine(text, line.lineno, current[1], current[0], None, line.source)
        elif not (
            _PROCESS.match(text)
            or _PYTHON.match(text)
            or NO_RANK.match(text)
            or (in_locals and _LOCAL.match(text))
        ):
            break  # the report ended: what follows is the job's again
        after_rank = False
        in_locals = in_locals and _LOCAL.match(text) is not None
        hang.block.add(i)
    _close(hang, current, frame)
    return hang


def _number(text: str) -> int | None:
    return None if text == "?" else int(text)


def _close(
    hang: Hang, current: tuple[int | None, int | None, int] | None, frame: LogLine | None
) -> None:
    if current is not None:
        rank, node, pid = current
        hang.ranks.append(RankStack(rank, node, pid, frame))
