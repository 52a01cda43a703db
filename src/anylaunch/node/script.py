"""The bash script a node runs, built the same way for every backend.

Order: the backend's rendezvous lines (MASTER_ADDR, MASTER_PORT, NNODES, NODE_RANK),
anylaunch's own variables, the job's `env:` (where `$NAME` expands on the node), files
(the recipe) written from quoted heredocs, the in-job steps that prepare the node
(writing the runtime, stage-in, resume), the pre hooks, the program, the post hooks and
the in-job steps that follow it (stage-out). The script's exit status is the program's.

In-job steps are shell lines, built by `anylaunch.node.runtime` (`write_shell` carries
the runtime's zipapp inside the script, `shell` calls one of its steps as
`python3 -I -S anylaunch_job.pyz STEP ARGS`), so the image needs only python3.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from anylaunch.node.command import Program, Torchrun, program
from anylaunch.node.shell import (
    Word,
    env_value,
    export,
    has_reference,
    word,
    write_file,
)


@dataclass(frozen=True)
class File:
    """A file written on the node before anything runs: its path (a word) and its text."""

    path: Word
    text: str


@dataclass(frozen=True)
class NodeScript:
    command: str | Sequence[str]
    launcher: str
    torchrun: Torchrun | None = None
    # The backend's lines that export the rendezvous contract on this node.
    rendezvous: Sequence[str] = ()
    # anylaunch's own variables: literal values, or expressions marked with Sh.
    exports: Mapping[str, Word] = field(default_factory=dict)
    # The job's env: values; `$NAME` and `${NAME}` in them expand on the node.
    env: Mapping[str, str] = field(default_factory=dict)
    # Export only the values that hold a `$NAME`: the platform sets the others.
    env_references_only: bool = False
    files: Sequence[File] = ()
    # In-job steps before the hooks (writing the runtime, stage-in, resume), shell lines.
    before: Sequence[str] = ()
    pre: Sequence[str] = ()
    post: Sequence[str] = ()
    # In-job steps after the post hooks (stage-out): they see the program's status in
    # `$rc` and may set it.
    after: Sequence[str] = ()
    # What `{config}` in the command stands for on the node.
    config: Word | None = None
    # Words in front of the program (`nsys profile ...`).
    wrap: Sequence[Word] = ()


def env_exports(env: Mapping[str, str], *, references_only: bool = False) -> list[str]:
    """`export NAME=value` lines for env: values (names were validated at load)."""
    return [
        export(name, env_value(value))
        for name, value in env.items()
        if has_reference(value) or not references_only
    ]


def program_of(node: NodeScript) -> Program:
    return program(
        node.command, node.launcher, torchrun=node.torchrun, config=node.config, wrap=node.wrap
    )


def lines(node: NodeScript) -> list[str]:
    out = list(node.rendezvous)
    out += [export(name, value) for name, value in node.exports.items()]
    env = env_exports(node.env, references_only=node.env_references_only)
    if env:
        out += ["# env:", *env]
    for file in node.files:
        out.append(f'mkdir -p "$(dirname -- {word(file.path)})"')
        out.append(write_file(file.path, file.text))
    out += list(node.before)
    run = program_of(node)
    out += run.setup
    if node.pre:
        out += ["set -e", *node.pre, "set +e"]
    if node.post or node.after:
        out += [run.line, "rc=$?"]
        if node.post:
            # In a subshell: they read the program's status in `$rc`, but an `exit` or an
            # `rc=` of theirs cannot replace it.
            out += ["(", *node.post, ")"]
        out += [*node.after, 'exit "$rc"']
    else:
        out.append(f"exec {run.line}")
    return out


def render(node: NodeScript) -> str:
    return "\n".join(lines(node)) + "\n"
