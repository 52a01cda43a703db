"""What one log line says on its own: the class a rule names or the signal or exit status
it reports, and how strongly. The engine weighs these findings against each other; the
whole-log readers (`teardown`, `hang`) read them too."""

from __future__ import annotations

from dataclasses import dataclass

from anylaunch.observe.diagnose import rules, signals
from anylaunch.observe.diagnose.classes import PRECEDENCE
from anylaunch.observe.diagnose.lines import LogLine, is_warning

WARNING = 0  # the strength of anything said on a warning line


@dataclass(frozen=True)
class Finding:
    line: LogLine
    code: str
    strength: int
    emitter: str
    reading: signals.Reading | None = None  # set when only a signal/exit status spoke

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
        finding = Finding(line, rule.code, rule.strength, rule.source)
    else:
        return None
    if is_warning(line.text):
        return Finding(line, finding.code, WARNING, finding.emitter, finding.reading)
    return finding
