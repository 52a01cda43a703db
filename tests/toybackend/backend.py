"""A toy backend: every node of a job is a process on this machine.

It shows what a backend needs and no more: it subclasses `Backend`, lives in this one
file, and is made available with one registry line, here given in the environment:

    ANYLAUNCH_BACKENDS=toy=toybackend.backend:ToyBackend

Its own section in the job file, `toy:`, is `ToySection` below, named by the class
(`section = ToySection`): the job file's `toy:` mapping is checked against it like any
built-in backend's (unknown keys, bad values: one line with file, line and key), and
its `nodes` stands for the neutral `nodes` (`Sized`). Without a section it reads the
neutral keys (command, nodes, env). `submit` starts a small supervisor in its own session that starts the
nodes, waits for them and writes their exit codes; `poll` reads that file, `cancel`
stops the session, `logs` says where each node's log is. What every backend shares
(recording, attempts, secrets, `--node`, masking) the API does.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypedDict

import psutil
from pydantic import BaseModel, ConfigDict, Field

from anylaunch.backends.base import Backend, LogSource, Observation, PlanContext
from anylaunch.backends.plan import Plan
from anylaunch.backends.section import Sized
from anylaunch.jobfile.spec import JobSpec
from anylaunch.state import State
from anylaunch.store import JobRecord, Store

RESULT = "result.json"


class ToySection(BaseModel, Sized):
    """The `toy:` section: how many node processes, and a label each node is given."""

    model_config = ConfigDict(extra="forbid")

    nodes: int | None = Field(default=None, ge=1, le=8)
    label: str | None = Field(default=None, description="exported to each node as TOY_LABEL")


class ToyPayload(TypedDict):
    argv: list[str]  # each node's command
    env: dict[str, str]  # its environment (no secrets: they come to `submit` apart)


class ToyBackend(Backend):
    name = "toy"
    section: ClassVar[type[BaseModel] | None] = ToySection

    def prepare(
        self, spec: JobSpec, job_id: str, job_dir: str, store: Store, *, reserve: bool = True
    ) -> PlanContext:
        return PlanContext(job_id=job_id, job_dir=job_dir)

    def plan(self, spec: JobSpec, ctx: PlanContext) -> Plan[ToyPayload]:
        section = spec.section(self.name)
        own = section if isinstance(section, ToySection) else ToySection()
        env = {**spec.public_env(), "ANYLAUNCH_JOB_ID": ctx.job_id}
        if own.label is not None:
            env["TOY_LABEL"] = own.label
        return Plan(
            backend=self.name,
            job_id=ctx.job_id,
            name=spec.name or ctx.job_id,
            job_dir=ctx.job_dir,
            nodes=spec.nodes or own.nodes or 1,
            payload={"argv": list(spec.command), "env": env},
            secret_env=sorted(spec.secret_env()),
        )

    def describe(self, plan: Plan[ToyPayload]) -> str:
        return f"# {plan.nodes} node(s), each: {shlex.join(plan.payload['argv'])}"

    def submit(
        self, plan: Plan[ToyPayload], secrets: Mapping[str, str]
    ) -> tuple[str, dict[str, Any]]:
        logs = Path(plan.job_dir) / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **plan.payload["env"], **secrets}  # secrets: never on disk
        proc = subprocess.Popen(
            [sys.executable, __file__, plan.job_dir, str(plan.nodes), *plan.payload["argv"]],
            env=env,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        started = psutil.Process(proc.pid).create_time()
        return str(proc.pid), {"started": started}

    def poll(self, jobs: Sequence[JobRecord]) -> dict[str, Observation]:
        out = {}
        for job in jobs:
            result = Path(job.job_dir) / RESULT
            if result.exists():
                codes = json.loads(result.read_text())
                failed = [c for c in codes if c != 0]
                state = State.FAILED if failed else State.SUCCEEDED
                out[job.id] = Observation(state, failed[0] if failed else 0)
            elif job.native_id and _alive(job):
                out[job.id] = Observation(State.RUNNING)
            elif job.native_id:
                out[job.id] = Observation(State.FAILED, detail="ended without a result")
        return out

    def cancel(self, job: JobRecord) -> None:
        """Stop the job's session and wait for its supervisor to end (the next poll then
        sees it gone, which the API records as CANCELLED)."""
        if not (job.native_id and _alive(job)):
            return
        supervisor = psutil.Process(int(job.native_id))
        os.killpg(supervisor.pid, signal.SIGTERM)
        try:
            supervisor.wait(timeout=10)
        except psutil.TimeoutExpired:
            os.killpg(supervisor.pid, signal.SIGKILL)
            supervisor.wait(timeout=10)

    def logs(self, job: JobRecord) -> Iterator[LogSource]:
        for node in range(int(job.plan.get("nodes", 1))):
            yield LogSource(node=node, path=str(Path(job.job_dir) / "logs" / f"node-{node}.log"))


class SectionlessToyBackend(ToyBackend):
    """The toy backend without a section of its own: it reads the neutral keys only."""

    name = "plaintoy"
    section = None


def _alive(job: JobRecord) -> bool:
    """The supervisor still runs (the same process: a reused pid has another start time)."""
    try:
        proc = psutil.Process(int(job.native_id or 0))
        same = abs(proc.create_time() - float(job.meta.get("started", 0))) < 0.01
        return same and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _supervise(job_dir: str, nodes: int, argv: list[str]) -> None:
    """Start every node, wait for all, write their exit codes (last, all at once)."""
    procs = []
    for node in range(nodes):
        log = open(Path(job_dir) / "logs" / f"node-{node}.log", "ab")  # noqa: SIM115
        env = {**os.environ, "NODE_RANK": str(node), "NNODES": str(nodes)}
        procs.append(subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT))
    codes = [proc.wait() for proc in procs]
    partial = Path(job_dir) / f"{RESULT}.part"
    partial.write_text(json.dumps(codes))
    partial.replace(Path(job_dir) / RESULT)


if __name__ == "__main__":
    _supervise(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
