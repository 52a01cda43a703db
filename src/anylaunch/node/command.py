"""The command rule, Docker's two forms, the same on every backend.

- A string is a shell line: bash runs it on each node (under `torchrun` and `srun`, once
  per rank), so `$NODE_RANK`, `&&`, pipes and redirections work there.
- A list is the exec form: the program receives every word exactly as written.

Under `torchrun`, a string that simply runs a Python script (`python train.py --lr 0.1`,
`train.py`, `python -m pkg`) keeps the usual rule: the leading `python` is dropped and the
rest follows torchrun's options, expanded by the node's shell. Any other string runs per
rank through `--no-python bash -c`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

from anylaunch.jobfile import shellwords
from anylaunch.node.shell import Sh, Word, concat, read_into, var, word, words

CONFIG_PLACEHOLDER = "{config}"  # in the command: the recipe file on the node
COMMAND_VAR = "ANYLAUNCH_COMMAND"
_PYTHON = re.compile(r"(?:.*/)?python[0-9.]*")
_SHORT = 8192  # longer lines with shell operators go to bash unexamined
_FIRST_WORD = re.compile(r"\s*(\S+)(?:\s+(.*))?\Z", re.S)


@dataclass(frozen=True)
class Torchrun:
    """One torchrun agent per node, on the rendezvous variables the node's script exports."""

    nproc_per_node: int
    launcher: Sequence[Word] = ("torchrun",)
    max_restarts: int = 0
    # What follows an interpreter named in the command to start torchrun under it.
    entry: Sequence[Word] = ("-m", "torch.distributed.run")

    def head(self, python: str | None = None) -> list[Word]:
        launcher = [python, *self.entry] if python else list(self.launcher)
        return [
            *launcher,
            "--nnodes", var("NNODES"),
            "--nproc-per-node", str(self.nproc_per_node),
            "--node-rank", var("NODE_RANK"),
            "--master-addr", var("MASTER_ADDR"),
            "--master-port", var("MASTER_PORT"),
            "--max-restarts", str(self.max_restarts),
        ]  # fmt: skip


@dataclass(frozen=True)
class Program:
    """How the node starts the command: lines before it, then one line that runs it."""

    line: str
    setup: list[str] = field(default_factory=list)


def uses_recipe(command: str | Sequence[str]) -> bool:
    """Does the command name `{config}`, the recipe file anylaunch writes on the node?"""
    if isinstance(command, str):
        return CONFIG_PLACEHOLDER in command
    return any(CONFIG_PLACEHOLDER in arg for arg in command)


def display(command: str | Sequence[str]) -> str:
    """The command as one line for people (preflight, listings)."""
    return command if isinstance(command, str) else shlex.join(command)


def program(
    command: str | Sequence[str],
    launcher: str,
    *,
    torchrun: Torchrun | None = None,
    config: Word | None = None,
    wrap: Sequence[Word] = (),
) -> Program:
    """The node's line for `command` under `launcher` (`torchrun` needs `torchrun`).

    `config` is what `{config}` stands for on the node; `wrap` goes in front of the whole
    program (`nsys profile ...`).
    """
    prefix = words(wrap) + " " if wrap else ""
    if isinstance(command, str):
        line = command.replace(CONFIG_PLACEHOLDER, word(config)) if config else command
        if launcher == "torchrun" and torchrun is not None:
            script = python_script(line)
            if script is not None:
                python, rest = script
                return Program(f"{prefix}{words(torchrun.head(python))} {rest}".rstrip())
            head = [*torchrun.head(), "--no-python", "bash", "-c", var(COMMAND_VAR)]
            return Program(prefix + words(head), read_into(COMMAND_VAR, line, "ANYLAUNCH_CMD"))
        return Program(
            prefix + words(["bash", "-c", var(COMMAND_VAR)]),
            read_into(COMMAND_VAR, line, "ANYLAUNCH_CMD"),
        )
    argv: list[Word] = [_config_word(arg, config) for arg in command]
    if launcher == "torchrun" and torchrun is not None:
        plain = list(command)
        runs_script = len(plain) > 1 and bool(_PYTHON.fullmatch(plain[0])) and _is_script(plain[1])
        python = plain[0] if runs_script and _absolute_python(plain[0]) else None
        argv = [*torchrun.head(python), *_torchrun_target(plain, argv)]
    return Program(prefix + words(argv))


def python_script(line: str) -> tuple[str | None, str] | None:
    """(interpreter, the rest of the line) when `line` only runs a Python script or module.

    The interpreter is kept only when it is an absolute path: torchrun then runs under it.
    Anything with shell operators, or more than one line, is not a plain script call.
    """
    if "\n" in line.strip() or _has_operator(line):
        return None
    try:
        parts = shellwords.split(line)
    except ValueError:
        return None
    match = _FIRST_WORD.match(line)
    if not parts or match is None or match.group(1) != parts[0]:
        return None  # a quoted first word: leave it to bash
    first, rest = parts[0], (match.group(2) or "").strip()
    if _PYTHON.fullmatch(first):
        if len(parts) < 2 or not _is_script(parts[1]):
            return None
        return (first if _absolute_python(first) else None), rest
    if first.endswith(".py"):
        return None, line.strip()
    return None


def _has_operator(line: str) -> bool:
    if not set(line) & set("();<>|&`"):
        return False
    if len(line) > _SHORT:
        return True  # shlex reads in quadratic time; bash -c runs any line correctly
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        return True
    return "`" in line or any(t and set(t) <= set("();<>|&") for t in tokens)


def _absolute_python(arg: str) -> bool:
    return arg.startswith("/") and bool(_PYTHON.fullmatch(arg))


def _is_script(arg: str) -> bool:
    return arg == "-m" or arg.endswith(".py")


def _torchrun_target(plain: list[str], argv: list[Word]) -> list[Word]:
    """What follows torchrun's options: a script, `-m module`, or `--no-python exe`.

    A leading python before a script or `-m` is dropped, since torchrun starts the
    interpreter itself; any other python call (`python -c ...`) runs as an executable.
    """
    if len(plain) > 1 and _PYTHON.fullmatch(plain[0]) and _is_script(plain[1]):
        return argv[1:]
    if not plain or _is_script(plain[0]) or plain[0] == "--no-python":
        return argv
    return ["--no-python", *argv]


def _config_word(arg: str, config: Word | None) -> Word:
    if config is None or CONFIG_PLACEHOLDER not in arg:
        return arg
    pieces: list[Word] = []
    for i, part in enumerate(arg.split(CONFIG_PLACEHOLDER)):
        if i:
            pieces.append(config)
        pieces.append(part)
    return concat(*pieces)


__all__ = ["CONFIG_PLACEHOLDER", "Program", "Sh", "Torchrun", "display", "program", "uses_recipe"]
