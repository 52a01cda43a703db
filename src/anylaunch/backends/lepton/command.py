"""The job's container command: Lepton worker variables -> rendezvous, hooks, program.

Lepton injects LEPTON_JOB_WORKER_INDEX / TOTAL_WORKERS / WORKER_PREFIX / SUBDOMAIN; the
official `lepton_env_to_pytorch.sh` (v4) turns them into MASTER_ADDR, MASTER_PORT,
NNODES, NODE_RANK and WORKER_ADDRS. TAO and NeMo-Run download that script with wget at
job start; we ship the same translation inside the command (R-L6), so a job never
depends on reaching GitHub from the cluster.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from anylaunch.rendezvous import torchrun_target

MASTER_PORT = 29400  # the script's constant (not torch's 29500)

ENV_TRANSLATION = """\
# Lepton worker variables -> PyTorch rendezvous (lepton_env_to_pytorch.sh v4, inline)
export MASTER_ADDR="${LEPTON_JOB_WORKER_PREFIX}-0.${LEPTON_SUBDOMAIN}"
export MASTER_PORT=%(port)d
export NNODES="${LEPTON_JOB_TOTAL_WORKERS}"
export NODE_RANK="${LEPTON_JOB_WORKER_INDEX}"
WORKER_ADDRS=""
for ((_w = 1; _w < NNODES; _w++)); do
  WORKER_ADDRS="${WORKER_ADDRS:+${WORKER_ADDRS},}${LEPTON_JOB_WORKER_PREFIX}-${_w}.${LEPTON_SUBDOMAIN}"
done
unset _w
export WORKER_ADDRS
"""


def shell_word(arg: str) -> str:
    """Quote one argument so the program gets it exactly as written (argv semantics).

    The local backend runs the command without a shell; on Lepton the command sits in a
    bash script, and quoting keeps the meaning the same. A job that wants the node's
    shell (`$NODE_RANK`, pipes) says so: `bash -c '...'`.
    """
    return shlex.quote(arg)


def program(command: list[str], launcher: str, gpus_per_node: int) -> str:
    """The line each replica runs after the translation: torchrun agent or the command."""
    if launcher == "torchrun":
        head = (
            'python -m torch.distributed.run --nnodes "$NNODES" '
            f'--nproc-per-node {gpus_per_node} --node-rank "$NODE_RANK" '
            '--master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT" --max-restarts 0'
        )
        return head + " " + " ".join(shell_word(a) for a in torchrun_target(command))
    return " ".join(shell_word(a) for a in command)


def script(
    *,
    command: list[str],
    launcher: str,
    gpus_per_node: int,
    pre: list[str],
    post: list[str],
    files: dict[str, str],
    setup: Sequence[str] = (),
) -> str:
    """The whole bash script: translation, files (the recipe), setup (resume), hooks, program."""
    lines = [ENV_TRANSLATION % {"port": MASTER_PORT}]
    for path, text in files.items():
        marker = "ANYLAUNCH_EOF"
        while marker in text:
            marker += "_"
        lines.append(f"mkdir -p {shlex.quote(path.rsplit('/', 1)[0] or '/')}")
        lines.append(f"cat > {shlex.quote(path)} <<'{marker}'\n{text.rstrip(chr(10))}\n{marker}")
    lines += list(setup)
    run = program(command, launcher, gpus_per_node)
    if pre:
        lines += ["set -e", *pre, "set +e"]
    if post:
        lines += [run, "rc=$?", *post, "exit $rc"]
    else:
        lines.append(f"exec {run}")
    return "\n".join(lines) + "\n"
