"""What one log line says on its own: the class a rule names or the signal or exit status
it reports, and how strongly. The engine weighs these findings against each other; the
whole-log readers (`teardown`, `hang`) read them too."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from anylaunch.observe.diagnose import rules, signals
from anylaunch.observe.diagnose.classes import PRECEDENCE
from anylaunch.observe.diagnose.lines import LogLine, is_warning

WARNING = 0  # the strength of anything said on a warning line
# A line that opens a record of its own ("sed: ...", "srun: error: ...", "rank 3: ..."),
# not the rest of the line before it.
RECORD = re.compile(r"^[\w.-]+( \d+)?:(\s|$)")


@dataclass(frozen=True)
class Finding:
    line: LogLine
    code: str
    strength: int
    emitter: str
    reading: signals.Reading | None = None  # set when only a signal/exit status spoke
    generic: bool = False  # the rule names only the shape of a line (an exception's)
    rule: rules.Rule | None = None  # the rule that named the line, when one did

    @property
    def key(self) -> tuple[int, int]:
        return (self.strength, PRECEDENCE[self.code])


def find(line: LogLine) -> Finding | None:
    """What one line says, if anything."""
    rule = rules.classify(line.text)
    reading = None
    if rule is None or rule.strength == rules.WEAK:
        reading = signals.read(line.text)
    if reading is not None:
        finding = Finding(line, reading.code, rules.WEAK, reading.meaning.source, reading)
    elif rule is not None:
        finding = Finding(
            line, rule.code, rule.strength, rule.source, generic=rule.generic, rule=rule
        )
    else:
        return None
    if is_warning(line.text):
        return dataclasses.replace(finding, strength=WARNING)
    return finding


def find_wrapped(
    line: LogLine, after: LogLine, alone: Finding | None, after_alone: Finding | None
) -> Finding | None:
    """What `line` says joined with the line after it, when a terminal or a paste wrapped
    one message onto two ("... killed by signal: Bus" / "error. It is possible ..."): a
    strong finding of a class neither line names alone, else None. When a strong rule
    names the line alone, only a rule before it in the table (a more specific one:
    "Unable to create step for job 1: More" / "processors requested than permitted.")
    reads it joined. Only a continuation is tried (the next line goes on in lower case,
    from the same node and log, and opens no record of its own), so most lines cost
    nothing."""
    named = alone is not None and alone.strength >= rules.STRONG and not alone.generic
    text = after.text
    if not text[:1].islower() or RECORD.match(text):
        return None
    if (after.node, after.source) != (line.node, line.source) or after.rank not in (
        None,
        line.rank,
    ):
        return None
    joined = find(LogLine(f"{line.text} {text}", line.lineno, line.node, line.rank,
                          line.local_rank, line.source))  # fmt: skip
    if joined is None or joined.strength < rules.STRONG or joined.generic:
        return None
    if named and alone is not None and rules.place(joined.rule) >= rules.place(alone.rule):
        return None  # not more specific than what the line says alone
    if any(f is not None and f.code == joined.code for f in (alone, after_alone)):
        return None  # what one of the lines says by itself
    # The evidence is the first line itself: the whole-log readers find lines by identity.
    return dataclasses.replace(joined, line=line)
