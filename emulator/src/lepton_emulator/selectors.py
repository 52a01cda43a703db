"""Kubernetes label selectors, as the job list's `query` parameter takes them.

`lep job list --label` sends `KEY`, `KEY=VALUE` (AND-joined with ','), or a raw
selector expression: `!KEY`, `KEY!=VALUE`, `KEY in (A,B)`, `KEY notin (A,B)`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

Match = Callable[[Mapping[str, str]], bool]
_SET = re.compile(r"^([^\s!=()]+)\s+(in|notin)\s+\(([^)]*)\)$")
_CMP = re.compile(r"^([^\s!=()]+)\s*(==|=|!=)\s*([^\s,()]*)$")
_KEY = re.compile(r"^(!?)([^\s!=()]+)$")


class BadSelector(ValueError):
    pass


def _split(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    parts.append(current.strip())
    return [p for p in parts if p]


def _term(text: str) -> Match:
    found = _SET.match(text)
    if found:
        key, op, raw = found.groups()
        values = {v.strip() for v in raw.split(",") if v.strip()}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    found = _CMP.match(text)
    if found:
        key, op, value = found.groups()
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    found = _KEY.match(text)
    if found:
        negate, key = found.groups()
        return (lambda labels: key not in labels) if negate else (lambda labels: key in labels)
    raise BadSelector(f"invalid label selector term {text!r}")


def parse(text: str) -> Match:
    """A predicate on a label mapping; every term must hold. Raises BadSelector."""
    terms = [_term(part) for part in _split(text)]
    return lambda labels: all(term(labels) for term in terms)
