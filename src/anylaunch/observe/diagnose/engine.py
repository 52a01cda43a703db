"""Weigh the evidence and name the root cause in one line, with a fix.

Evidence is every node's log lines, the backend's events and end reason (as lines), the
end state and the exit code. Each line is classified by `rules`; a line no rule names,
or only a weak rule, is read for the signal or exit status it reports (`signals`).

The backend's own verdict comes first when it is definitive (a TIMEOUT, PREEMPTED or
CANCELLED state; a job the hang watchdog stopped is the hang's). Otherwise the
strongest finding wins: a rule naming the failure beats a symptom, an error line beats
any warning line, and among equals the class with the higher precedence wins (the OOM
on one rank over the watchdog timeouts it causes on the others). Its first line names
the failing rank and node; torchrun's "Root Cause" block of the same node supplies the
rank when the lines carry none.

Two diagnoses read the log as a whole: a hang (`hang`: the watchdog's report, every
rank's stack) and a failure after the training was over (`teardown`: the ranks' last
lines, then the shutdown failing), which would otherwise read as the program's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from anylaunch.observe.diagnose import hang, rules, signals, teardown
from anylaunch.observe.diagnose.classes import BY_CODE
from anylaunch.observe.diagnose.findings import Finding, find, find_wrapped
from anylaunch.observe.diagnose.lines import LogLine, parse

# Backend states that are the diagnosis by themselves.
_STATE_VERDICT = {"TIMEOUT": "TIME_LIMIT", "PREEMPTED": "PREEMPTED", "CANCELLED": "CANCELLED"}
MAX_EVIDENCE = 5
MAX_RANKS = 64  # a hang's evidence: one line per rank, up to this many
MAX_ENDS = 8  # a teardown failure's evidence: the ranks' last lines, up to this many
WATCHDOG = "anylaunch hang watchdog (py-spy dump)"
PROGRAM_END = "the training program (training over)"


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


def diagnose_text(text: str, **kwargs: Any) -> Diagnosis:
    return diagnose_lines(parse(text), **kwargs)


def diagnose_lines(
    lines: Sequence[LogLine],
    *,
    state: str | None = None,
    exit_code: int | None = None,
    cancel_requested: bool = False,
    events: Iterable[str] = (),
) -> Diagnosis:
    lines = [*lines, *(LogLine(e, i, source="event") for i, e in enumerate(events, 1))]
    stuck = hang.read(lines)
    stacks = stuck.block if stuck is not None else set()
    found = _findings(lines, stacks)
    if stuck is not None:
        found.append(Finding(stuck.header, "HANG", rules.STRONG, WATCHDOG))
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
    if verdict == "CANCELLED" and stuck is not None:
        verdict = None  # stopped by the hang watchdog: the hang is why
    if verdict:
        code = verdict
    elif found:
        code = max(found, key=lambda f: f.key).code
    else:
        code = "UNKNOWN"
    if code == "HANG" and stuck is not None:
        return _hung(stuck)
    if not verdict and code in teardown.CASCADE_CLASSES:
        ended = teardown.read(lines, found, rules.STRONG)
        if ended is not None:
            return _torn_down(ended, lines)

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


def _findings(lines: Sequence[LogLine], skip: set[int]) -> list[Finding]:
    """Each line's finding; a line a terminal wrapped is read joined with the next one."""
    alone = [None if i in skip else find(line) for i, line in enumerate(lines)]
    out = []
    for i, line in enumerate(lines):
        finding = alone[i]
        if i not in skip and i + 1 < len(lines) and i + 1 not in skip:
            finding = find_wrapped(line, lines[i + 1], finding, alone[i + 1]) or finding
        if finding is not None:
            out.append(finding)
    return out


def _hung(stuck: hang.Hang) -> Diagnosis:
    """HANG: where each rank's main thread waits, one evidence line per rank."""
    info = BY_CODE["HANG"]
    frames = stuck.frames()
    odd = stuck.odd_one()
    groups: dict[str, list[LogLine]] = {}
    for line in frames:
        groups.setdefault(line.text, []).append(line)
    waits = "; ".join(
        f"{_ranks(group)} {'in' if hang.FRAME.match(text) else 'unread:'} {text}"
        for text, group in sorted(groups.items(), key=lambda g: len(g[1]))
    )
    cause = f"{info.cause} for {stuck.seconds}s" + (f"; {waits}" if waits else "")
    first = None
    if odd is not None:
        where = f"rank {_or_unknown(odd.rank)}, node {_or_unknown(odd.node)}"
        first = {"rank": odd.rank, "node": odd.node, "where": where}
    shown = frames[:MAX_RANKS] or [stuck.header]
    return Diagnosis(
        code="HANG",
        err_class=info.err_class,
        retryable=info.retryable,
        cause=_short(cause, 400),
        suggestion=info.suggestion,
        evidence=[_evidence(Finding(line, "HANG", rules.STRONG, WATCHDOG)) for line in shown],
        first_failure=first,
    )


def _ranks(lines: list[LogLine]) -> str:
    named = [f"{_or_unknown(line.rank)} (node {_or_unknown(line.node)})" for line in lines]
    return ("rank " if len(named) == 1 else "ranks ") + ", ".join(named)


def _or_unknown(number: int | None) -> str:
    return "?" if number is None else str(number)


def _torn_down(ended: teardown.Teardown, lines: Sequence[LogLine]) -> Diagnosis:
    """TEARDOWN_FAILED: the lines saying training was over, then the shutdown failing."""
    info = BY_CODE["TEARDOWN_FAILED"]
    failures = ended.failures
    first = _first_failure(failures, lines)
    where = f" on {first['where']}" if first and first.get("where") else ""
    lead = failures[0]
    inferred = lead.reading is not None
    if lead.reading is not None:
        detail = f" — inferred: {lead.reading.meaning.inference} ({_short(lead.line.text)})"
    else:
        detail = f": {_short(lead.line.text)}"
    ends = [Finding(line, "TEARDOWN_FAILED", rules.WEAK, PROGRAM_END) for line in ended.ends]
    shown = ends[:MAX_ENDS] + failures[:3]
    order = {id(line): i for i, line in enumerate(lines)}
    shown.sort(key=lambda f: order.get(id(f.line), len(order)))
    return Diagnosis(
        code="TEARDOWN_FAILED",
        err_class=info.err_class,
        retryable=info.retryable,
        cause=f"{info.cause}{where}{detail}",
        suggestion=info.suggestion,
        evidence=[_evidence(f) for f in shown],
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
