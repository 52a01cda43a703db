"""The local backend: torchrun on this machine, N simulated nodes on 127.0.0.1.

A detached supervisor process (`supervisor.py`) owns the node processes, so a job keeps
running and still gets its final state recorded after the CLI that started it exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from anylaunch.backends.base import (
    Backend,
    Capabilities,
    Entry,
    Found,
    LogSource,
    NotReachable,
    Observation,
    PlanContext,
    Relay,
    Submitted,
)
from anylaunch.backends.local.config import LocalSection
from anylaunch.backends.local.gpus import visible_gpus
from anylaunch.errors import BackendError
from anylaunch.jobfile.spec import JobSpec
from anylaunch.state import State
from anylaunch.store import JobRecord, Store, home, private
from anylaunch.store.proctime import create_time, running

# Loading a job file builds this backend's section model, and `status` polls: neither
# needs the planner, the starter or psutil, which load on first use.
if TYPE_CHECKING:
    import psutil

    from anylaunch.backends.checks import Check
    from anylaunch.backends.local.plan import LocalPayload
    from anylaunch.backends.plan import Plan

RESULT_FILE = "result.json"
PLAN_FILE = "plan.json"
# Processes this machine runs at once for a local job, unless `local.force: true`.
RANKS_PER_CPU = 8
MIN_RANKS = 64
# Below Linux's ephemeral range (32768+), so outgoing connections never take our port.
_PORT_RANGE = (20000, 32000)

# Supervisors started by this process, kept so that polling reaps them (no zombies).
_children: set[int] = set()


class LocalBackend(Backend):
    name: ClassVar[str] = "local"
    section: ClassVar[type[BaseModel] | None] = LocalSection
    capabilities: ClassVar[Capabilities] = Capabilities(
        cancel_on_interrupt=True, watchdog=True, snapshot=True
    )

    def prepare(
        self, spec: JobSpec, job_id: str, job_dir: str, store: Store, *, reserve: bool = True
    ) -> PlanContext:
        section = spec.local
        nnodes = (section.nnodes if section else None) or spec.nodes or 1
        size = spec.per_node(self.name)
        devices = visible_gpus()
        nproc = size.ranks
        if section and section.nproc_per_node == "auto":
            nproc = len(devices) or 1
        master_addr = section.master_addr if section else "127.0.0.1"
        port = section.master_port if section and section.master_port else None
        if port is None:
            port = _free_port(master_addr, store, job_id if reserve else None)
        workdir = section.workdir if section and section.workdir else None
        if workdir and spec.source and not os.path.isabs(workdir):
            workdir = str(Path(spec.source).resolve().parent / workdir)
        code_dir = workdir or os.getcwd()
        # With a snapshot the nodes run from the copy made in the job's folder at submit.
        snapshot = bool(spec.snapshot and spec.snapshot.enabled)
        return PlanContext(
            job_id=job_id,
            job_dir=job_dir,
            values={
                "nnodes": nnodes,
                "nproc_per_node": nproc,
                "gpus_per_node": size.gpus,
                "gpus": devices,
                "master_port": port,
                "code_dir": code_dir,
                "snapshot": snapshot,
                "workdir": f"{job_dir}/snapshot" if snapshot else code_dir,
                "python": (section.python if section and section.python else sys.executable),
                "cache_root": _cache_root(spec, store.root),
                "py_spy": _py_spy() if spec.watchdog is not None else None,
            },
        )

    def preflight(self, spec: JobSpec, *, deep: bool = False) -> list[Check]:
        from anylaunch.backends.local import preflight

        return preflight.checks(spec)

    def too_big(self, spec: JobSpec, nodes: int, ranks: int) -> tuple[str, str] | None:
        """Every rank of a local job is a process on this machine: more than it can run
        at once would only thrash, unless the user insists (`local.force`)."""
        if (spec.local and spec.local.force) or nodes * ranks <= most_ranks():
            return None
        return (
            f"{nodes} nodes x {ranks} processes = {nodes * ranks} processes; this machine"
            f" ({os.cpu_count()} CPUs) runs at most {most_ranks()} at once",
            "lower nodes or ranks_per_node (gpus_per_node), or set local.force: true to"
            " start them anyway",
        )

    def shared_filesystem(self, spec: JobSpec) -> str | None:
        """The staging cache on this machine: every local job with the same cache root
        sees the same files."""
        return f"local {socket.gethostname()}:{_cache_root(spec, home())}"

    def plan(self, spec: JobSpec, ctx: PlanContext) -> Plan[LocalPayload]:
        from anylaunch.backends.local import plan as local_plan

        return local_plan.render(spec, ctx)

    def describe(self, plan: Plan[LocalPayload]) -> str:
        from anylaunch.backends.local import plan as local_plan

        return local_plan.describe(plan)

    def submit(self, plan: Plan[LocalPayload], secrets: Mapping[str, str]) -> Submitted:
        job_dir = private.folder(plan.job_dir)
        private.folder(job_dir / "logs")
        if plan.payload.get("nsys_dir"):
            Path(plan.payload["nsys_dir"]).mkdir(parents=True, exist_ok=True)
        private.write(job_dir / PLAN_FILE, plan.model_dump_json(indent=2))
        for rel, text in plan.files.items():
            private.write(job_dir / rel, text)
        if "runtime" in plan.payload:
            from anylaunch.node import runtime

            private.write(job_dir / runtime.FILE_NAME, runtime.unpacked(plan.payload["runtime"]))
        env = {**os.environ, **secrets}
        env["ANYLAUNCH_HOME"] = str(job_dir.parent.parent)
        env["ANYLAUNCH_JOB_ID"] = plan.job_id
        from anylaunch.backends.local import start as local_start

        pid = local_start.start(job_dir, plan.payload, env)
        _children.add(pid)
        return str(pid), {"create_time": create_time(pid)}

    def poll(self, jobs: Sequence[JobRecord]) -> dict[str, Observation]:
        if _children:
            from anylaunch.backends.local import start as local_start

            for pid in list(_children):
                if local_start.reap(pid):
                    _children.discard(pid)
        return {job.id: self._observe(job) for job in jobs}

    def _observe(self, job: JobRecord) -> Observation:
        result = _read_result(job)
        if result is not None:
            return result
        if _supervisor_runs(job):
            return Observation(job.state)  # the supervisor records its own progress
        if job.native_id is None:
            return Observation(State.UNKNOWN)
        # Gone without a result: read again, the supervisor may have just finished.
        return _read_result(job) or _orphaned(job)

    def reconcile(self, jobs: Sequence[JobRecord]) -> Found:
        """Which of these jobs, recorded without a native id, were started anyway.

        A supervisor runs with its job directory as argument, so one scan of the process
        table finds it; one that already ended left `result.json` or moved the row past
        PENDING. Absent from the answer: never started, safe to submit.
        """
        import psutil

        from anylaunch.backends.local.supervisor import ENTRY as SUPERVISOR_ENTRY

        running: dict[str, psutil.Process] = {}
        for proc in psutil.process_iter(["cmdline"]):
            argv = proc.info.get("cmdline") or []
            if len(argv) >= 4 and argv[-2] == SUPERVISOR_ENTRY:
                running[argv[-1]] = proc
        found: dict[str, tuple[str | None, dict[str, Any]]] = {}
        for job in jobs:
            supervisor = running.get(job.job_dir)
            if supervisor is not None:
                with contextlib.suppress(psutil.NoSuchProcess):
                    found[job.id] = (str(supervisor.pid), {"create_time": supervisor.create_time()})
                    continue
            if job.state is not State.PENDING or _read_result(job) is not None:
                found[job.id] = (None, {})
        return found

    def cancel(self, job: JobRecord) -> None:
        import psutil

        from anylaunch.backends.local.proctree import job_processes, kill

        proc = _supervisor(job)
        if proc is None:
            # No supervisor to ask: end whatever of the job still runs, found by its id.
            leftovers = job_processes(job.id)
            kill(leftovers)
            psutil.wait_procs(leftovers, timeout=10)
            return
        grace = float(job.plan.get("payload", {}).get("kill_grace_s", 10.0))
        # Snapshot the tree first: if the supervisor must be killed, its children would
        # be re-parented and impossible to find.
        tree = _tree(proc)
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=grace + 10)
        except psutil.NoSuchProcess:
            pass
        except psutil.TimeoutExpired:
            kill([proc])
        kill(tree)  # no-op for processes that already ended

    def logs(self, job: JobRecord) -> Iterator[LogSource]:
        for entry in job.plan.get("payload", {}).get("nodes", []):
            yield LogSource(node=entry["node_rank"], path=entry["log"])

    # -- a running job's nodes: processes of this machine ---------------------------------

    def enter(self, job: JobRecord, node: int, command: Sequence[str], *, tty: bool) -> Entry:
        """The command runs here, in the environment and folder the node's process has
        (read from /proc: the job's `env:`, its secrets, the rendezvous variables)."""
        from anylaunch.jobfile.secrets import secret_values
        from anylaunch.node.runtime import live

        proc = live.node_process(live.job_processes(job.id), node)
        if proc is None:
            raise NotReachable(
                f"no process of job {job.id} runs node {node} on this machine (it has not"
                f" started, or it ended) — see anylaunch status {job.id}"
            )
        env = live.node_env(proc)
        cwd: str | None = None
        with contextlib.suppress(OSError):
            cwd = os.readlink(f"/proc/{proc.pid}/cwd")
        argv = list(command) or [shutil.which("bash", path=env.get("PATH")) or "sh"]
        hidden = secret_values(job.plan.get("secret_env", []), environ=env)
        via = f"node {node}'s process {proc.pid} on this machine"
        return Entry(argv, via, env=env, cwd=cwd, secrets=frozenset(hidden))

    def stacks(
        self, job: JobRecord, node: int | None, py_spy: str | None, secret_names: Sequence[str]
    ) -> list[dict[str, Any]]:
        from anylaunch.jobfile.secrets import name_pattern
        from anylaunch.node.runtime import live

        return live.stacks(job.id, node, py_spy, list(secret_names), name_pattern())

    def relay(self, job: JobRecord, node: int, port: int) -> Relay:
        """Every simulated node is this machine: its port is already here."""
        return Relay("the node is this machine", address=("127.0.0.1", port))

    def hosts(self, job: JobRecord) -> list[str]:
        """Every simulated node is this machine: a failure pinned on one cannot be
        avoided here, and the controller says so."""
        return [socket.gethostname()] * len(job.plan.get("payload", {}).get("nodes", []))


def _cache_root(spec: JobSpec, root: Path) -> str:
    """Where the job's inputs are cached: `local.cache_root`, else the store's `cache`."""
    section = spec.local
    return os.path.expanduser(
        section.cache_root if section and section.cache_root else str(root / "cache")
    )


def _py_spy() -> str | None:
    from anylaunch.node import runtime

    return runtime.py_spy()


def most_ranks() -> int:
    """How many processes a local job may start on this machine without `local.force`."""
    return max(MIN_RANKS, RANKS_PER_CPU * (os.cpu_count() or 1))


def _free_port(addr: str, store: Store, job_id: str | None) -> int:
    """A port nobody listens on, reserved in the store so two jobs never share it."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(*_PORT_RANGE)
        with socket.socket() as sock:
            try:
                sock.bind((addr, port))
            except OSError:
                continue
        if job_id is None or store.reserve_port(port, job_id):
            return port
    raise BackendError(f"no free port in {_PORT_RANGE} on {addr} — set local.master_port")


def _orphaned(job: JobRecord) -> Observation:
    """A supervisor that died without writing a result (killed, out of memory).

    Its nodes got SIGTERM with it; whatever of the job still runs is ended here, since no
    process is left to record its end. How the training ended is not known, so the job
    is not called FAILED: it becomes UNKNOWN for good once nothing of it runs, and its
    logs tell the rest.
    """
    from anylaunch.backends.local.proctree import job_processes, kill

    pid = job.native_id
    leftovers = job_processes(job.id)
    if leftovers:
        kill(leftovers)
        return Observation(
            State.UNKNOWN,
            None,
            f"the job's supervisor (pid {pid}) died without a result;"
            f" ending {len(leftovers)} process(es) it left",
        )
    return Observation(
        State.UNKNOWN,
        None,
        f"the job's supervisor (pid {pid}) died without a result: its nodes were stopped"
        " with it and how the job ended is not known — see its logs",
        final=True,
    )


def _read_result(job: JobRecord) -> Observation | None:
    """The end the supervisor of the job's current attempt wrote, if it did. UNKNOWN
    there is for good: the supervisor could not tell how a node ended, and nobody later
    can."""
    # The job can write its folder: a FIFO or a link there must not hang or mislead `ps`.
    from anylaunch.observe.jobfiles import read_inside

    name = str(job.plan.get("payload", {}).get("result", RESULT_FILE))
    try:
        result = json.loads(read_inside(job.job_dir, name, limit=1 << 20))
        state = State(result["state"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return Observation(
        state, result.get("exit_code"), result.get("detail"), final=state is State.UNKNOWN
    )


def _supervisor_runs(job: JobRecord) -> bool:
    """`_supervisor(job) is not None`, read from /proc: a poll needs no psutil."""
    try:
        pid = int(job.native_id or "")
    except ValueError:
        return False
    return running(pid, job.meta.get("create_time"))


def _supervisor(job: JobRecord) -> psutil.Process | None:
    """The job's supervisor if it still runs, checked by pid *and* start time: the pid
    comes from the store, and a process it does not prove to be ours is never signalled
    (a record without a start time is left to the search by job id)."""
    started = job.meta.get("create_time")
    if not job.native_id or not job.native_id.isdigit() or started is None:
        return None
    import psutil

    try:
        pid = int(job.native_id)
        if pid <= 1:
            return None  # never init, nor the kernel's idle task
        proc = psutil.Process(pid)
        if abs(proc.create_time() - float(started)) > 0.5:
            return None  # the pid was reused by another process
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc
    except (psutil.NoSuchProcess, TypeError, ValueError):
        return None


def _tree(proc: psutil.Process) -> list[psutil.Process]:
    import psutil

    try:
        return proc.children(recursive=True)
    except psutil.NoSuchProcess:
        return []
