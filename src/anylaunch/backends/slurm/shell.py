"""Shell words for the sbatch script: every user value quoted, shell expressions marked.

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
