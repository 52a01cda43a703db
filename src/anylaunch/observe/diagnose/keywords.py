"""A fast pre-check for the rules: the literal words a pattern cannot match without.

Most lines of a training log are progress, and searching every line with every rule's
case-insensitive regex costs milliseconds a line. Each alternative of a pattern has a
run of plain characters it always needs ("oom_kill event" needs "oom", "kill event");
a line that contains none of a rule's words cannot match it, which a substring test
on the lower-cased line tells in well under a microsecond. An alternative with no such
run (a pattern made only of classes and groups) makes its rule always searched.
"""

from __future__ import annotations

_ESCAPED = {
    ".",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "*",
    "+",
    "?",
    "|",
    "^",
    "$",
    "\\",
    "/",
    "-",
    "'",
    '"',
    ":",
    "=",
    "<",
    ">",
    "#",
    "`",
    "@",
    " ",
    ",",
    "!",
    "%",
    "&",
    "~",
    ";",
}
MIN_LENGTH = 3


def split_top(pattern: str) -> list[str]:
    """The pattern's alternatives at the top level (not inside groups or classes)."""
    out, depth, start, i, in_class = [], 0, 0, 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "|" and depth == 0 and not in_class:
            out.append(pattern[start:i])
            start = i + 1
        depth, in_class = _nesting(c, depth, in_class)
        i += 1
    out.append(pattern[start:])
    return out


def _nesting(c: str, depth: int, in_class: bool) -> tuple[int, bool]:
    """Group depth, and whether inside a [class], after the (unescaped) character `c`."""
    if in_class:
        return depth, c != "]"
    if c == "[":
        return depth, True
    if c in "()":
        return depth + (1 if c == "(" else -1), False
    return depth, False


def required_literal(alternative: str) -> str | None:
    """The longest run of plain characters the alternative always matches, lower-cased."""
    runs, current, i, depth, in_class = [], "", 0, 0, False
    text = alternative
    while i < len(text):
        c = text[i]
        nxt = text[i + 1] if i + 1 < len(text) else ""
        if in_class:
            if c == "\\":
                i += 2
                continue
            if c == "]":
                in_class = False
                i = _skip_quantifier(text, i + 1)
                continue
            i += 1
            continue
        if depth:
            if c == "\\":
                i += 2
                continue
            depth, in_class = _nesting(c, depth, in_class)
            # A group's quantifier may make the whole group optional: skip it too.
            i = _skip_quantifier(text, i + 1) if depth == 0 else i + 1
            continue
        if c == "(":
            runs.append(current)
            current, depth = "", 1
        elif c == "[":
            runs.append(current)
            current, in_class = "", True
        elif c == "\\" and nxt in _ESCAPED:
            literal, i = nxt, i + 2
            if _quantified(text, i):
                runs.append(current)
                current = ""
                i = _skip_quantifier(text, i)
            else:
                current += literal
            continue
        elif c == "\\" or c in ".^$":
            runs.append(current)
            current = ""
            i = _skip_quantifier(text, i + (2 if c == "\\" else 1))
            continue
        elif c in "?*+{":
            # The character before is optional (or repeated): keep what surely precedes it.
            runs.append(current[:-1] if c in "?*{" else current)
            current = ""
            i = _skip_quantifier(text, i)
            continue
        else:
            current += c
        i += 1
    runs.append(current)
    best = max(runs, key=len)
    return best.lower() if len(best) >= MIN_LENGTH else None


def _quantified(text: str, i: int) -> bool:
    return i < len(text) and text[i] in "?*{"


def _skip_quantifier(text: str, i: int) -> int:
    if i < len(text) and text[i] == "{":
        end = text.find("}", i)
        i = end + 1 if end != -1 else i + 1
    elif i < len(text) and text[i] in "?*+":
        i += 1
    if i < len(text) and text[i] in "?+":  # lazy or possessive
        i += 1
    return i


def words(patterns: tuple[str, ...]) -> tuple[str, ...] | None:
    """One required word per alternative of every pattern, or None: always search."""
    out = []
    for pattern in patterns:
        for alternative in split_top(pattern):
            word = required_literal(alternative)
            if word is None:
                return None
            out.append(word)
    return tuple(out)
