"""Score the classifier on a corpus of real failure messages.

A corpus is a folder of YAML files, each a list of cases: `text` (one message or a
whole log), `expect` (the class), `source` (where the text comes from), and optionally
`variants` (other wordings of the same failure), `state`, `exit_code`, `events`,
`node`, `rank` and `inferred`. Every text and every variant is one scored message.
tests/diagnose/corpus/ is ours; the test run and `python -m bench` print its accuracy.

Rules written while reading the whole corpus fit it by construction, so the score on the
corpus says little about messages nobody collected. `split` holds out whole source
repositories (every message taken from one repository, its code or its issue tracker,
falls on one side), the way a set of messages from other projects' issues would; the
rules are tuned on the other side and the held-out side's score is the estimate.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from anylaunch.observe.diagnose import rules
from anylaunch.observe.diagnose.engine import Diagnosis, diagnose_text
from anylaunch.observe.diagnose.findings import find
from anylaunch.observe.diagnose.lines import parse
from anylaunch.observe.diagnose.signals import MEANINGS


@dataclass(frozen=True, kw_only=True)
class Case:
    """One corpus entry (or one of its variants): a log, and what diagnosis must find in it."""

    file: str
    index: int
    source: str
    # What the diagnosis is given.
    text: str
    events: tuple[str, ...] = ()
    state: str | None = None
    exit_code: int | None = None
    # What it must find.
    expect: str
    node: int | None = None
    rank: int | None = None
    inferred: bool | None = None

    @property
    def id(self) -> str:
        return f"{self.file}#{self.index}"

    @property
    def repository(self) -> str:
        return repository(self.source)

    def run(self) -> Diagnosis:
        return diagnose_text(
            self.text, state=self.state, exit_code=self.exit_code, events=self.events
        )

    def check(self, result: Diagnosis) -> list[str]:
        """What the diagnosis got wrong ([] when it is right)."""
        wrong = []
        if result.code != self.expect:
            wrong.append(f"class {result.code}, expected {self.expect}")
        first = result.first_failure or {}
        for key in ("node", "rank"):
            want = getattr(self, key)
            if want is not None and first.get(key) != want:
                wrong.append(f"{key} {first.get(key)}, expected {want}")
        if self.inferred is not None and result.inferred != self.inferred:
            wrong.append(f"inferred {result.inferred}, expected {self.inferred}")
        return wrong


@dataclass
class Score:
    cases: list[Case]
    misses: list[tuple[Case, list[str]]] = field(default_factory=list)
    unused_rules: list[str] = field(default_factory=list)

    @property
    def right(self) -> int:
        return len(self.cases) - len(self.misses)

    @property
    def accuracy(self) -> float:
        return self.right / len(self.cases) if self.cases else 0.0

    def held_out(self) -> Score:
        """The score on the held-out side of `split` alone."""
        cases = [c for c in self.cases if held_out(c)]
        ids = {id(c) for c in cases}
        return Score(cases, [(c, w) for c, w in self.misses if id(c) in ids])

    def line(self) -> str:
        out = self.held_out()
        repos = len({c.repository for c in out.cases})
        return (
            f"diagnosis corpus: {self.right}/{len(self.cases)} right ({self.accuracy:.1%}), "
            f"{len(rules.RULES) - len(self.unused_rules)}/{len(rules.RULES)} rules exercised; "
            f"held out by source repository: {out.right}/{len(out.cases)} right "
            f"({out.accuracy:.1%}, {repos} repositories)"
        )


_GITHUB = re.compile(r"github\.com/([\w.-]+/[\w.-]+)")
_OWNER_NAME = re.compile(r"^([\w.+-]+/[\w.+-]+)(?=$|[\s;,(])")


def repository(source: str) -> str:
    """The repository a case's text comes from, lower-cased: `owner/name` from an issue's
    address or a leading `owner/name path`, else the source's first word (a program or a
    vendor's documents: "NVIDIA Xid errors ...", "GNU bash")."""
    found = _GITHUB.search(source) or _OWNER_NAME.match(source)
    if found:
        return found.group(1).lower()
    return re.split(r"[\s(;,]", source.strip(), maxsplit=1)[0].lower()


def held_out(case: Case) -> bool:
    """Which side of the split a case's repository is on: a hash of its name alone, so
    the split never depends on what else the corpus holds."""
    return hashlib.sha256(case.repository.encode()).digest()[0] % 2 == 1


def split(cases: list[Case]) -> tuple[list[Case], list[Case]]:
    """(tuned on, held out): whole repositories on one side or the other."""
    return [c for c in cases if not held_out(c)], [c for c in cases if held_out(c)]


def load(folder: Path, *, clear_only: bool = False) -> list[Case]:
    """The cases of every YAML file in `folder`; with `clear_only`, without those whose
    collector marked the label `ambiguous` (a held-out set's arguable cases)."""
    cases = []
    for path in sorted(folder.glob("*.yaml")):
        entries: list[dict[str, Any]] = yaml.safe_load(path.read_text()) or []
        for i, entry in enumerate(entries, 1):
            if clear_only and entry.get("ambiguous"):
                continue
            common = {
                "file": path.name,
                "index": i,
                "source": entry["source"],
                "expect": entry["expect"],
                "state": entry.get("state"),
                "exit_code": entry.get("exit_code"),
                "events": tuple(entry.get("events", ())),
                "node": entry.get("node"),
                "rank": entry.get("rank"),
                "inferred": entry.get("inferred"),
            }
            cases.append(Case(text=entry["text"], **common))
            cases += [Case(text=v, **common) for v in entry.get("variants", ())]
    return cases


def score(cases: list[Case]) -> Score:
    result = Score(cases)
    used: set[int] = set()
    for case in cases:
        wrong = case.check(case.run())
        if wrong:
            result.misses.append((case, wrong))
        for line in parse(case.text):
            rule = rules.classify(line.text)
            if rule is not None:
                used.add(id(rule))
    result.unused_rules = [f"{r.code}: {r.name}" for r in rules.RULES if id(r) not in used]
    return result


def signals_read(cases: list[Case]) -> set[int]:
    """The signals the corpus' lines and exit codes report."""
    seen = set()
    for case in cases:
        lines = parse(case.text)
        for line in lines:
            finding = find(line)
            if finding is not None and finding.reading is not None:
                seen.add(finding.reading.meaning.signal)
        if case.exit_code and case.exit_code > 128:
            seen.add(case.exit_code - 128)
    return seen & set(MEANINGS)
