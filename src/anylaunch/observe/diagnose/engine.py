"""Weigh the evidence and name the root cause in one line, with a fix.

Evidence is every node's log lines, the backend's events and end reason (as lines), the
end state and the exit code. Each line is classified by `rules`; a line no rule names,
or only a weak rule, is read for the signal or exit status it reports (`signals`).

The backend's own verdict comes first when it is definitive (a TIMEOUT, PREEMPTED or
CANCELLED state). Otherwise the strongest finding wins: a rule naming the failure
beats a symptom, an error line beats any warning line, and among equals the class
with the higher precedence wins (the OOM on one rank over the watchdog timeouts it
causes on the others). Its first line names the failing rank and node; torchrun's
"Root Cause" block of the same node supplies the rank when the lines carry none.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from anylaunch.observe.diagnose import rules, signals
from anylaunch.observe.diagnose.classes import BY_CODE, PRECEDENCE
from anylaunch.observe.diagnose.lines import LogLine, is_warning, parse

# Backend states that are the diagnosis by themselves.
_STATE_VERDICT = {"TIMEOUT": "TIME_LIMIT", "PREEMPTED": "PREEMPTED", "CANCELLED": "CANCELLED"}
MAX_EVIDENCE = 5
_WARNING = 0  # the strength of anything said on a warning line


@dataclass
class Diagnosis:
    code: str
    err_class: str
    retryable: bool
    cause: str
    suggestion: str
    evidence: list[dict[str, Any]] = field(default_factory=list)
    first_failure: dict[str, Any] | None = None
    inferred: bool = False  # from an exit code or signal alone, no message naming the cause

    def to_json(self, job_id: str | None = None) -> dict[str, Any]:
        """`diagnose --json`: about job `job_id` (None for a log file read by itself)."""
        return {
            "id": job_id,
            "kind": "diagnosis",
            "code": self.code,
            "err_class": self.err_class,
            "retryable": self.retryable,
            "cause": self.cause,
            "suggestion": self.suggestion,
            "inferred": self.inferred,
            "evidence": self.evidence,
            "first_failure": self.first_failure,
        }


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


def diagnose_text(text: str, **kwargs: Any) -> Diagnosis:
    return diagnose_lines(parse(text), **kwargs)


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
        return Finding(line, finding.code, _WARNING, finding.emitter, finding.reading)
    return finding


def diagnose_lines(
    lines: Sequence[LogLine],
    *,
    state: str | None = None,
    exit_code: int | None = None,
    cancel_requested: bool = False,
    events: Iterable[str] = (),
) -> Diagnosis:
    lines = [*lines, *(LogLine(e, i, source="event") for i, e in enumerate(events, 1))]
    found = [f for line in lines if (f := find(line)) is not None]
    exit_reading = signals.from_exit(exit_code)
    if exit_reading is not None:
        text = f"exit code {exit_code}"
        found.append(
            Finding(
                LogLine(text, 0, source="exit"),
                exit_reading.code,
                rules.WEAK,
                exit_reading.meaning.source,
                exit_reading,
            )
        )

    verdict = "CANCELLED" if cancel_requested else _STATE_VERDICT.get(state or "")
    if verdict:
        code = verdict
    elif found:
        code = max(found, key=lambda f: f.key).code
    else:
        code = "UNKNOWN"

    # The lines naming the failure first, then its symptoms; warnings last.
    chosen = sorted((f for f in found if f.code == code), key=lambda f: -f.strength)
    lead = chosen[0].reading if chosen else None
    inferred = lead is not None and not verdict and all(f.reading is not None for f in chosen)
    first = _first_failure(chosen, lines)
    info = BY_CODE[code]
    where = f" on {first['where']}" if first and first.get("where") else ""
    if inferred and lead is not None:
        cause = f"{info.cause}{where} — inferred: {lead.meaning.inference}"
        cause += f" ({_short(chosen[0].line.text)})"
    else:
        detail = f": {_short(chosen[0].line.text)}" if chosen else ""
        cause = f"{info.cause}{where}{detail}"
    return Diagnosis(
        code=code,
        err_class=info.err_class,
        retryable=info.retryable,
        cause=cause,
        suggestion=info.suggestion,
        evidence=[_evidence(f) for f in chosen[:MAX_EVIDENCE]],
        first_failure=first,
        inferred=inferred,
    )


def _first_failure(chosen: list[Finding], lines: Sequence[LogLine]) -> dict[str, Any] | None:
    """The first line of the winning class, with torchrun's root-cause rank as a fallback."""
    summary = _root_cause_ranks(lines)
    best = [f.line for f in chosen if f.strength == chosen[0].strength] if chosen else []
    ranked = [line for line in best if line.rank is not None]
    line = ranked[0] if ranked else (best[0] if best else None)
    rank: int | None
    if line is None:
        if not summary:
            return None
        node, rank = next(iter(summary.items()))
    else:
        node = line.node
        rank = line.rank if line.rank is not None else summary.get(node)
        if rank is None and line.local_rank is None and len(summary) == 1 and node is None:
            rank = next(iter(summary.values()))
    if rank is None and node is None:
        return None
    out: dict[str, Any] = {"rank": rank, "node": node}
    local = line.local_rank if line is not None and rank is None else None
    out["where"] = LogLine("", 0, node, rank, local).where()
    return out


def _root_cause_ranks(lines: Sequence[LogLine]) -> dict[int | None, int]:
    """node -> the rank torchrun's "Root Cause (first observed failure)" block names."""
    out: dict[int | None, int] = {}
    for i, line in enumerate(lines):
        match = rules.ROOT_CAUSE_RANK.match(line.text)
        if match and any("Root Cause" in p.text for p in lines[max(0, i - 6) : i]):
            out.setdefault(line.node, int(match.group(1)))
    return out


def _evidence(finding: Finding) -> dict[str, Any]:
    line = finding.line
    return {
        "id": f"{line.source}:{line.lineno}",
        "kind": "evidence",
        "node": line.node,
        "rank": line.rank,
        "line": line.lineno,
        "source": line.source,
        "text": _short(line.text, 300),
        "emitter": finding.emitter,
    }


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
