"""A running Slurm job's nodes: a job step of our own inside its allocation.

`srun --jobid=J --overlap` starts a step in a running job from outside it (a login node),
sharing the resources the job's own steps hold (without `--overlap` it would wait for
them to be free, which for a training job is never). `--nodelist` picks the node. On the
node the step runs the in-job runtime's `live` module (`python3 -I -S -c`, standard
library only), which finds the job's processes there by ANYLAUNCH_JOB_ID: a command
runs in the environment of the node's own process, the stacks are py-spy's dumps of
each rank, a forwarded connection is a pipe to the node's port. Compute nodes need no
sshd, and their ports need not be reachable from here.

For a cluster reached over ssh (`slurm.login`) every one of these commands runs on its
login node, through the same shared connection as the job's other Slurm commands: the
queries through `commands.run`, and what runs here for the user's terminal or for each
forwarded connection (`exec`, `shell`, `forward`) as that ssh command.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from anylaunch.backends.base import Entry, NotReachable, Relay
from anylaunch.backends.slurm import commands
from anylaunch.backends.slurm.cluster import login_in
from anylaunch.backends.slurm.login import Login
from anylaunch.errors import UsageError
from anylaunch.jobfile.secrets import is_secret_name, name_pattern
from anylaunch.node import runtime

# Generous: a step waits for slurmctld and each py-spy dump for its rank.
STACK_TIMEOUT_S = 180


def allocation(native_id: str, via: Login | None = None) -> tuple[str, list[str]]:
    """The running job's numeric id (an array task's own) and its hosts in node order
    (SLURM_NODEID counts along the expanded node list)."""
    argv = ["squeue", "-h", "-j", native_id, "-o", "%A|%T|%N"]
    proc = commands.run(argv, check=False, via=via)
    rows = [line.split("|") for line in proc.stdout.splitlines() if line.count("|") == 2]
    if proc.returncode != 0 or not rows:
        raise NotReachable(
            f"Slurm does not run job {native_id} any more (squeue has no such job)",
            code="NOT_RUNNING",
        )
    job_id, state, nodelist = rows[0]
    if state != "RUNNING":
        raise NotReachable(
            f"Slurm job {native_id} is {state}: no node runs it yet — wait until it is RUNNING",
            code="NOT_RUNNING",
        )
    hosts = commands.run(["scontrol", "show", "hostnames", nodelist], via=via).stdout.split()
    return job_id, hosts


def step(job_id: str, hosts: Sequence[str], *, tty: bool = False) -> list[str]:
    """`srun` for one task on each of `hosts`, inside the running job `job_id`."""
    argv = [
        "srun",
        f"--jobid={job_id}",
        "--overlap",
        f"--nodelist={','.join(hosts)}",
        f"--nodes={len(hosts)}",
        f"--ntasks={len(hosts)}",
        "--ntasks-per-node=1",
        "--quiet",
    ]
    return [*argv, "--pty"] if tty else argv


def _host(hosts: list[str], node: int, native_id: str) -> str:
    if not 0 <= node < len(hosts):
        raise UsageError(
            f"Slurm job {native_id} runs on {len(hosts)} nodes; node {node} is not one"
        )
    return hosts[node]


def environment() -> dict[str, str]:
    """What srun runs with: this environment without the variables of an allocation we
    may be inside (they would bend the step) and without our secrets (the node has the
    job's own)."""
    return {
        k: v
        for k, v in os.environ.items()
        if (not k.startswith("SLURM_") or k == "SLURM_CONF") and not is_secret_name(k)
    }


def _login(job: Any) -> Login | None:
    """The login node the job was submitted through; None: this machine's Slurm tools."""
    return login_in(job.plan.get("payload", {}))


def _here(argv: list[str], via: Login | None, *, tty: bool = False) -> list[str]:
    """`argv` as a program run on this machine: itself, or ssh running it on the login
    node (over the shared connection, opened now so every use of it rides on it)."""
    if via is None:
        return argv
    via.connect()
    return via.ssh(argv, tty=tty)


def _through(via: Login | None) -> str:
    return "" if via is None else f"ssh {via.text}, "


def enter(job: Any, node: int, command: Sequence[str], *, tty: bool) -> Entry:
    via = _login(job)
    job_id, hosts = allocation(job.native_id, via)
    host = _host(hosts, node, job.native_id)
    argv = [
        *step(job_id, [host], tty=tty),
        *runtime.live_argv("enter", job.id, str(node), "--", *command),
    ]
    return Entry(
        _here(argv, via, tty=tty),
        f"{_through(via)}srun --jobid={job_id} --overlap on {host}",
        env=environment(),
    )


def stacks(
    job: Any, node: int | None, py_spy: str | None, secret_names: Sequence[str]
) -> list[dict[str, Any]]:
    """One step with a task on each node (or on `node`'s); each prints its ranks."""
    via = _login(job)
    job_id, hosts = allocation(job.native_id, via)
    on = hosts if node is None else [_host(hosts, node, job.native_id)]
    words = ["stack", job.id, "--secret-pattern", name_pattern()]
    if py_spy:
        words += ["--py-spy", py_spy]
    for name in secret_names:
        words += ["--secret", name]
    if node is not None:
        words += ["--node", str(node)]
    proc = commands.run(
        [*step(job_id, on), *runtime.live_argv(*words)],
        # On a login node the step gets that session's environment: this one's is of
        # another machine (and `env` there would be sent over).
        env=environment() if via is None else None,
        check=False,
        timeout=STACK_TIMEOUT_S,
        via=via,
    )
    found: list[dict[str, Any]] = []
    for line in proc.stdout.splitlines():
        try:
            found += json.loads(line)["ranks"]
        except (ValueError, KeyError, TypeError):
            continue
    if proc.returncode != 0 and not found:
        why = " ".join(proc.stderr.split()) or f"exit status {proc.returncode}"
        raise NotReachable(f"srun into Slurm job {job_id} failed: {why}", code="SLURM")
    return found


def relay(job: Any, node: int, port: int) -> Relay:
    """Each connection is a step on the node piping to its port: the way in that works
    wherever srun does, even where compute nodes' ports are closed to the login node."""
    via = _login(job)
    job_id, hosts = allocation(job.native_id, via)
    host = _host(hosts, node, job.native_id)
    argv = [
        *step(job_id, [host]),
        "--unbuffered",
        *runtime.live_argv("pipe", "127.0.0.1", str(port)),
    ]
    how = f"{_through(via)}srun --jobid={job_id} --overlap on {host}, one step per connection"
    return Relay(how, argv=_here(argv, via), env=environment())
