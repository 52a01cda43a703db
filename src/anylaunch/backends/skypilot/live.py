"""A running SkyPilot job's nodes, through the ssh aliases SkyPilot writes for a cluster.

`sky launch` adds a Host entry per cluster to the user's ssh configuration: the head is
the cluster's name and worker i is `<cluster>-worker<i>` (`ssh mycluster-worker1`). On
the node the in-job runtime's `live` module (`python3 -I -S -c`, standard library only)
finds the job's processes by ANYLAUNCH_JOB_ID, as on every backend. A managed job runs
on a cluster of SkyPilot's own, with no alias here: it cannot be reached this way.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Sequence
from typing import Any

from anylaunch.backends.base import Entry, NotReachable, Relay
from anylaunch.jobfile.secrets import name_pattern
from anylaunch.node import runtime

MANAGED = "managed/"
STACK_TIMEOUT_S = 180


def alias(job: Any, node: int) -> str:
    """The ssh alias of the job's node `node`."""
    native = job.native_id or ""
    if native.startswith(MANAGED) or job.meta.get("mode") == "managed":
        raise NotReachable(
            f"job {job.id} is a SkyPilot managed job: its cluster is SkyPilot's own and has"
            " no ssh alias here — run it on a cluster (skypilot.cluster_name) to reach it"
        )
    cluster = job.meta.get("cluster_name") or native.rpartition("/")[0]
    if not cluster or native.startswith("request/"):
        raise NotReachable(f"job {job.id} has no SkyPilot cluster yet — wait until it runs")
    return cluster if node == 0 else f"{cluster}-worker{node}"


def _remote(host: str, argv: Sequence[str], *, tty: bool) -> list[str]:
    """ssh runs one shell line on the node: the words are quoted into it."""
    return ["ssh", "-t" if tty else "-T", host, shlex.join(argv)]


def enter(job: Any, node: int, command: Sequence[str], *, tty: bool) -> Entry:
    host = alias(job, node)
    argv = _remote(host, runtime.live_argv("enter", job.id, str(node), "--", *command), tty=tty)
    return Entry(argv, f"ssh {host}")


def stacks(
    job: Any, node: int | None, py_spy: str | None, secret_names: Sequence[str]
) -> list[dict[str, Any]]:
    """One ssh per node (the head's alias is node 0's); each prints its ranks. The
    submitting side's py-spy is not on a cloud node: the node's own is used."""
    nodes = range(int(job.plan.get("nodes", 1))) if node is None else [node]
    words = ["stack", job.id, "--secret-pattern", name_pattern()]
    words += [w for name in secret_names for w in ("--secret", name)]
    found: list[dict[str, Any]] = []
    for each in nodes:
        host = alias(job, each)
        argv = _remote(host, runtime.live_argv(*words, "--node", str(each)), tty=False)
        try:
            proc = subprocess.run(
                argv, capture_output=True, text=True, timeout=STACK_TIMEOUT_S, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise NotReachable(f"ssh {host} failed: {exc}") from None
        if proc.returncode != 0:
            why = " ".join(proc.stderr.split()) or f"exit status {proc.returncode}"
            raise NotReachable(f"ssh {host} failed: {why}")
        for line in proc.stdout.splitlines():
            try:
                found += json.loads(line)["ranks"]
            except (ValueError, KeyError, TypeError):
                continue
    return found


def relay(job: Any, node: int, port: int) -> Relay:
    """Each connection is `ssh -W`: the node's sshd opens its own port for it."""
    host = alias(job, node)
    return Relay(f"ssh -W to {host}", argv=["ssh", "-W", f"127.0.0.1:{port}", host], env=os.environ)
