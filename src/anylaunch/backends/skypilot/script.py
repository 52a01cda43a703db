"""The task's `run` script: SkyPilot's node variables -> the rendezvous contract -> program.

SkyPilot starts `run` once per node with SKYPILOT_NODE_RANK, SKYPILOT_NUM_NODES and
SKYPILOT_NODE_IPS (one IP per line, head first). Like every backend, the script exports
MASTER_ADDR, MASTER_PORT, NNODES, NODE_RANK and NUM_GPU_PER_NODE, then runs the
resume step (anylaunch.resume), the hooks and the command in the job's launcher mode.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from anylaunch import resume, runtime
from anylaunch.rendezvous import torchrun_target

RENDEZVOUS = """\
# SkyPilot node variables -> the rendezvous contract (DESIGN: launcher modes)
export MASTER_ADDR="$(printf '%s\\n' "$SKYPILOT_NODE_IPS" | head -n 1)"
export MASTER_PORT={port}
export NNODES="${{SKYPILOT_NUM_NODES:-1}}"
export NODE_RANK="${{SKYPILOT_NODE_RANK:-0}}"
export NUM_GPU_PER_NODE={gpus}
export NPROC_PER_NODE={gpus}"""

RECIPE_ENV = "ANYLAUNCH_RECIPE"
CONFIG_PLACEHOLDER = "{config}"  # in the command: the recipe file on the node
_PLAIN = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")
_REF = re.compile(r"\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True)
class RunScript:
    job_id: str
    command: list[str]
    launcher: str
    nproc_per_node: int
    master_port: int
    checkpoint_dir: str | None = None
    pre: list[str] = field(default_factory=list)
    post: list[str] = field(default_factory=list)
    recipe_text: str | None = None  # written to $ANYLAUNCH_RECIPE when `{config}` is used
    recipe: dict | None = None  # the unrendered recipe, for `restore_from.path`


def shell_word(arg: str) -> str:
    """Quote one argument for bash, keeping `$VAR` / `${VAR}` references live.

    Job commands are shell code: DESIGN leaves a bare `$VAR` for the shell, and a
    command written for SkyPilot says `--node-rank=$SKYPILOT_NODE_RANK`.
    """
    if _PLAIN.match(arg):
        return arg
    if _REF.search(arg) and "$(" not in arg and "`" not in arg:
        escaped = arg.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    return shlex.quote(arg)


def program(command: list[str], launcher: str, nproc: int) -> str:
    """One torchrun agent per node, or the command itself (launcher `none`)."""
    if launcher != "torchrun":
        return " ".join(shell_word(a) for a in command)
    # `/opt/venv/bin/python train.py` runs torchrun under that interpreter.
    first = command[0] if command else ""
    python = first if first.startswith("/") and "python" in first.rsplit("/", 1)[-1] else "python"
    head = (
        f"{shell_word(python)} -m torch.distributed.run"
        f' --nnodes "$NNODES" --nproc-per-node {nproc} --node-rank "$NODE_RANK"'
        ' --master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT" --max-restarts 0'
    )
    return head + " " + " ".join(shell_word(a) for a in torchrun_target(command))


def render(run: RunScript) -> str:
    lines = [RENDEZVOUS.format(port=run.master_port, gpus=run.nproc_per_node)]
    if run.launcher == "none":
        lines.append('export WORLD_SIZE="$NNODES"  # TAO convention: number of nodes')
    lines.append(f"export ANYLAUNCH_JOB_ID={shlex.quote(run.job_id)}")
    # Per node: virtual nodes of one host (the devstack) must not share files.
    runtime_word = f'"${{TMPDIR:-/tmp}}/anylaunch-{run.job_id}-node$NODE_RANK/{runtime.FILE_NAME}"'
    resume_step = resume.shell(run.checkpoint_dir, runtime_word)
    if resume_step:
        lines.append("# resume contract: the newest complete checkpoint (anylaunch.resume)")
        lines.append(runtime.write_shell(runtime_word, None, "resume"))
        lines.append(resume_step)
    if run.recipe_text is not None:
        # Per node: virtual nodes of one host (the devstack) must not share the file.
        lines.append(
            f'export {RECIPE_ENV}="${{TMPDIR:-/tmp}}/anylaunch-{run.job_id}-node$NODE_RANK.yaml"'
        )
        lines.append(_write_file(f'"${RECIPE_ENV}"', run.recipe_text))
        fill = resume.fill_recipe(f'"${RECIPE_ENV}"', run.recipe or {}, runtime_word)
        if fill:
            if not resume_step:
                lines.append(runtime.write_shell(runtime_word, None, "resume"))
            lines.append(fill)
    body = program(run.command, run.launcher, run.nproc_per_node)
    if run.pre:
        lines += ["set -e", *run.pre, "set +e"]
    if run.post:
        lines += [body, "rc=$?", *run.post, "exit $rc"]
    else:
        lines.append(body)
    return "\n".join(lines) + "\n"


def _write_file(path_word: str, text: str) -> str:
    marker = "ANYLAUNCH_EOF"
    while marker in text:
        marker += "_"
    return f"cat > {path_word} <<'{marker}'\n{text.rstrip(chr(10))}\n{marker}"
