"""Pick the root cause among classified lines and say it in one line with a fix.

The backend's own verdict comes first when it is definitive (a TIMEOUT, PREEMPTED or
CANCELLED state). Otherwise the strongest, highest-precedence class among all nodes'
lines wins, and its first line names the failing rank and node. torchrun's "Root
Cause" block confirms the rank when the logs carry no rank prefixes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from anylaunch.diagnose import rules
from anylaunch.diagnose.lines import LogLine, parse

# Backend states that are the diagnosis by themselves.
_STATE_VERDICT = {"TIMEOUT": "TIME_LIMIT", "PREEMPTED": "PREEMPTED", "CANCELLED": "CANCELLED"}
# Exit statuses that hint at a cause when the logs say nothing stronger.
_EXIT_HINT = {137: "OOM_HOST", 135: "SHM", 124: "TIME_LIMIT", 143: "CANCELLED", 139: "USER_ERROR"}
MAX_EVIDENCE = 5


@dataclass
class Diagnosis:
    code: str
    err_class: str
    retryable: bool
    cause: str
    suggestion: str
    evidence: list[dict[str, Any]] = field(default_factory=list)
    first_failure: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "err_class": self.err_class,
            "retryable": self.retryable,
            "cause": self.cause,
            "suggestion": self.suggestion,
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
    matched = [(line, rule) for line in lines if (rule := rules.classify(line.text)) is not None]
    verdict = "CANCELLED" if cancel_requested else _STATE_VERDICT.get(state or "")
    if verdict:
        code = verdict
    elif matched:
        code = max(matched, key=lambda m: (m[1].strength, rules.PRECEDENCE[m[1].code]))[1].code
        if exit_code in _EXIT_HINT and not any(r.strength == rules.STRONG for _, r in matched):
            code = _EXIT_HINT[exit_code]
    elif exit_code in _EXIT_HINT:
        code = _EXIT_HINT[exit_code]
    elif exit_code not in (None, 0):
        code = "USER_ERROR" if state in (None, "FAILED") else "UNKNOWN"
    else:
        code = "UNKNOWN"

    # Lines naming the failure itself first ("ValueError: ..."), then its symptoms.
    ordered = sorted((m for m in matched if m[1].code == code), key=lambda m: -m[1].strength)
    chosen = [line for line, _ in ordered]
    first = _first_failure(chosen, lines)
    info = rules.BY_CODE[code]
    where = f" on {first['where']}" if first and first.get("where") else ""
    detail = (
        f": {_short(chosen[0].text)}"
        if chosen
        else (f" (exit code {exit_code})" if exit_code else "")
    )
    return Diagnosis(
        code=code,
        err_class=info.err_class,
        retryable=info.retryable,
        cause=f"{info.cause}{where}{detail}",
        suggestion=info.suggestion,
        evidence=[_evidence(line) for line in chosen[:MAX_EVIDENCE]],
        first_failure=first,
    )


def _first_failure(chosen: list[LogLine], lines: Sequence[LogLine]) -> dict[str, Any] | None:
    """The first line of the winning class, with torchrun's root-cause rank as a fallback."""
    summary_rank = None
    for i, line in enumerate(lines):
        match = rules.ROOT_CAUSE_RANK.match(line.text)
        if match and any("Root Cause" in p.text for p in lines[max(0, i - 6) : i]):
            summary_rank = int(match.group(1))
            break
    ranked = [line for line in chosen if line.rank is not None]
    line = ranked[0] if ranked else (chosen[0] if chosen else None)
    if line is None and summary_rank is None:
        return None
    rank = line.rank if line is not None and line.rank is not None else summary_rank
    node = line.node if line is not None else None
    out = {"rank": rank, "node": node}
    out["where"] = LogLine("", 0, node, rank).where()
    return out


def _evidence(line: LogLine) -> dict[str, Any]:
    return {
        "node": line.node,
        "rank": line.rank,
        "line": line.lineno,
        "source": line.source,
        "text": _short(line.text, 300),
    }


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
