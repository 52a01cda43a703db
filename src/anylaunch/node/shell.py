"""Shell words for node scripts: every user value quoted, shell expressions marked.

A script mixes literal values from the job file (quoted with shlex.quote, so a job name
such as `'; rm -rf ~` stays text) with expressions that must expand on the node
(`"$SLURM_NODEID"`). `Sh` marks the second kind; everything else is quoted.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# `$NAME` and `${NAME}`: the only shell syntax an env value keeps.
_REFERENCE = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*|\{[A-Za-z_][A-Za-z0-9_]*\})")


@dataclass(frozen=True)
class Sh:
    """Text that is already a shell word (an expansion written by us), never quoted again."""

    text: str


Word = str | Sh


def word(value: Word) -> str:
    return value.text if isinstance(value, Sh) else shlex.quote(value)


def words(values: Iterable[Word]) -> str:
    return " ".join(word(v) for v in values)


def concat(*pieces: Word) -> Sh:
    """One shell word from literal and expanded pieces: `/x:` + `"$HOME"/y`."""
    return Sh("".join(word(p) if isinstance(p, Sh) or p else "" for p in pieces))


def var(name: str) -> Sh:
    return Sh(f'"${name}"')


def path(value: str) -> Sh:
    """A path from the job file; a leading `~/` is the home directory on the node."""
    if value == "~":
        return Sh('"$HOME"')
    if value.startswith("~/"):
        return Sh('"$HOME"/' + shlex.quote(value[2:]))
    return Sh(shlex.quote(value))


def valid_name(name: str) -> bool:
    """Only identifiers may be exported: `export A;B=1` would run `B=1` as a command."""
    return bool(_NAME.match(name))


def export(name: str, value: Word) -> str:
    return f"export {name}={word(value)}"


def heredoc_tag(body: str, base: str = "ANYLAUNCH_TASK") -> str:
    """A heredoc delimiter that no line of `body` equals (a user value could contain one)."""
    lines = set(body.splitlines())
    tag, n = base, 0
    while tag in lines:
        n += 1
        tag = f"{base}_{n}"
    return tag


def write_file(target: Word, text: str) -> str:
    """`cat > FILE` from a quoted heredoc: the text arrives byte for byte, nothing expands."""
    tag = heredoc_tag(text, "ANYLAUNCH_EOF")
    return f"cat > {word(target)} <<'{tag}'\n{text.rstrip(chr(10))}\n{tag}"


def read_into(name: str, text: str, base: str) -> list[str]:
    """Lines that set the shell variable `name` to `text` verbatim (a quoted heredoc)."""
    tag = heredoc_tag(text, base)
    return [f"read -r -d '' {name} <<'{tag}' || true", text.rstrip("\n"), tag]


def has_reference(value: str) -> bool:
    return bool(_REFERENCE.search(value))


def env_value(value: str) -> Sh:
    """An `env:` value as one word in which `$NAME` and `${NAME}` expand on the node.

    Nothing else in it is shell code: `$(...)`, backticks, `$((...))`, quotes, `\\`, `*`
    and `;` stay text, as in a Dockerfile's ENV.
    """
    if not has_reference(value):
        return Sh(shlex.quote(value))
    out, last = ['"'], 0
    for match in _REFERENCE.finditer(value):
        out.append(_in_double_quotes(value[last : match.start()]))
        out.append(match.group(0))
        last = match.end()
    out.append(_in_double_quotes(value[last:]))
    out.append('"')
    return Sh("".join(out))


def _in_double_quotes(text: str) -> str:
    return "".join("\\" + c if c in '\\"$`' else c for c in text)
