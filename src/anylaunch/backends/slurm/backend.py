"""The Slurm backend: sbatch to submit, one squeue (+ at most one sacct) to poll many jobs.

The job's directory (under `$ANYLAUNCH_HOME/jobs/`) holds the script and every node's
log, so it must be on a filesystem the compute nodes share with the submitting host —
as home directories are on most clusters.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from anylaunch.backends.base import (
    Backend,
    Capabilities,
    ChainStep,
    Entry,
    Found,
    LogSource,
    Observation,
    OnStart,
    PlanContext,
    Relay,
    Submitted,
)
from anylaunch.backends.plan import Plan
from anylaunch.backends.slurm import plan as slurm_plan
from anylaunch.backends.slurm import states
from anylaunch.backends.slurm.config import SlurmSection
from anylaunch.backends.slurm.plan import SlurmPayload
from anylaunch.errors import BackendError, ConfigError, SubmitOutcomeUnknown
from anylaunch.jobfile.spec import JobSpec
from anylaunch.observe.reachability import Unreachable
from anylaunch.state import State

if TYPE_CHECKING:
    from anylaunch.backends.checks import Check
    from anylaunch.backends.slurm import parse
    from anylaunch.store import JobRecord, Store

# The commands (subprocess, shutil) and the preflight checks are imported by the methods
# that run them: a dry-run renders a plan and runs nothing.

CANCEL_WAIT_S = 60.0
# Inherited from an enclosing allocation, these would bend the new job (SLURM_JOB_ID,
# SLURM_NTASKS, ...); SLURM_CONF says which cluster to talk to and stays.
_KEEP = frozenset({"SLURM_CONF"})
# sbatch's words when slurmctld got the request but its answer did not come back.
_MAYBE_SUBMITTED = "Socket timed out on send/recv operation"


class SlurmBackend(Backend):
    name: ClassVar[str] = "slurm"
    section: ClassVar[type[BaseModel] | None] = SlurmSection
    # srun starts one task per rank itself: only Slurm has it.
    capabilities: ClassVar[Capabilities] = Capabilities(
        launchers=frozenset({"torchrun", "srun", "none"}), watchdog=True
    )

    # -- rendering ------------------------------------------------------------------------

    def prepare(
        self, spec: JobSpec, job_id: str, job_dir: str, store: Store, *, reserve: bool = True
    ) -> PlanContext:
        values: dict[str, Any] = {"workdir": _workdir(spec)}
        if spec.watchdog is not None:
            from anylaunch.node import runtime

            values["py_spy"] = runtime.py_spy()  # the watchdog's, where the nodes see it
        section = spec.slurm
        if section and section.template:
            where = _relative_to_job_file(spec, section.template)
            try:
                values["template"] = Path(where).read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(
                    f"cannot read the template {where} ({exc.strerror})",
                    file=spec.source,
                    key="slurm.template",
                    fix="give the path of an sbatch template (relative to the job file)",
                ) from None
            values["template_path"] = where
        if section and section.job_dir:
            # AutoModel's job_dir: the job's files (script, recipe, logs) go under it, on
            # the shared filesystem the nodes see, one folder per job.
            job_dir = str(Path(_relative_to_job_file(spec, section.job_dir)) / job_id)
        return PlanContext(job_id=job_id, job_dir=job_dir, values=values)

    def plan(self, spec: JobSpec, ctx: PlanContext) -> Plan[SlurmPayload]:
        return slurm_plan.render(spec, ctx)

    def plan_array(
        self, spec: JobSpec, splits: Sequence[tuple[int, PlanContext]]
    ) -> Plan[SlurmPayload]:
        """One script for many splits (`sbatch --array`), each split an anylaunch job."""
        first = splits[0][1]
        values_of = spec.split_values()
        rows = [
            {
                "split_id": i,
                "job_id": c.job_id,
                "job_dir": c.job_dir,
                "value": values_of[i] if i < len(values_of) else None,
                "attempt": c.values.get("attempt", 1),
            }
            for i, c in splits
        ]
        values = {**first.values, "splits": rows}
        return slurm_plan.render(spec, PlanContext(first.job_id, first.job_dir, values))

    def task_plan(self, plan: dict[str, Any], first_job_id: str) -> dict[str, Any]:
        """A later task's stored plan: all but the script and the task list, which grow
        with the array and which the first task's record holds."""
        where = f"(the array's script: in the plan of job {first_job_id})"
        return {**plan, "payload": {**plan["payload"], "script": where, "splits": []}, "files": {}}

    def describe(self, plan: Plan[SlurmPayload]) -> str:
        return slurm_plan.describe(plan)

    def secret_values(self, spec: JobSpec) -> dict[str, str]:
        """The job's secret `env` and those of `slurm.env_vars` (`env` wins a name both have)."""
        section = spec.slurm.secret_env() if spec.slurm else {}
        return {**section, **spec.secret_env()}

    def time_limit_s(self, spec: JobSpec) -> int | None:
        from anylaunch.backends.slurm.config import duration_seconds

        return duration_seconds(spec.slurm.time) if spec.slurm and spec.slurm.time else None

    def preflight(self, spec: JobSpec, *, deep: bool = False) -> list[Check]:
        """Time-limit advice and, for a GPU job, the partition's GPUs always; with `deep`,
        the controller, the partition and a short srun that checks mounts and the port."""
        from anylaunch.backends.slurm import preflight as checks_of

        checks = checks_of.spec_checks(spec)
        if deep:
            return checks + checks_of.cluster_checks(spec)
        return checks + checks_of.gpu_checks(spec)

    def shared_filesystem(self, spec: JobSpec) -> str | None:
        """`slurm.cache_root`, which the cluster's nodes share; without it the cache is
        the job's own folder, which no other job reads."""
        cache_root = spec.slurm.cache_root if spec.slurm else None
        return f"slurm {cache_root}" if cache_root else None

    # -- a graph of steps with native dependencies (`ChainSubmission`, in chain.py) -------

    def with_needs(self, spec: JobSpec, after: Sequence[str]) -> JobSpec:
        from anylaunch.backends.slurm import chain

        return chain.with_dependency(spec, after)

    def describe_chain(self) -> str:
        return (
            "every step on Slurm: submitted at once, each waiting on the steps it needs with"
            " --dependency=afterok (<step> below: that step's Slurm job id); no controller"
        )

    def submit_chain(
        self, steps: Sequence[ChainStep], store: Store, on_start: OnStart | None = None
    ) -> None:
        from anylaunch.backends.slurm import chain

        chain.submit(steps, store, on_start=on_start, check=False, backend=self)

    def retry_chain(
        self, steps: Sequence[ChainStep], store: Store, on_start: OnStart | None = None
    ) -> dict[str, list[int]]:
        from anylaunch.backends.slurm import chain

        return chain.retry_failed(steps, store, on_start=on_start, backend=self)

    # -- side effects ---------------------------------------------------------------------

    def submit(self, plan: Plan[SlurmPayload], secrets: Mapping[str, str]) -> Submitted:
        native = self._sbatch(plan, secrets)
        return native, {"requeue": plan.payload["requeue"], "array": False}

    def submit_array(
        self, plan: Plan[SlurmPayload], secrets: Mapping[str, str]
    ) -> list[tuple[str, dict[str, Any]]]:
        """Submit the array once; each split's native id is `<array id>_<split id>`."""
        base = self._sbatch(plan, secrets)
        meta = {"requeue": plan.payload["requeue"], "array": True, "array_job_id": base}
        return [(f"{base}_{s['split_id']}", meta) for s in plan.payload["splits"]]

    def _sbatch(self, plan: Plan[SlurmPayload], secrets: Mapping[str, str]) -> str:
        from anylaunch.backends.slurm import commands, parse

        job_dirs = [s["job_dir"] for s in plan.payload["splits"]] or [plan.job_dir]
        for job_dir in job_dirs:
            # sbatch fails a job whose --output directory is missing (ExitCode 0:53).
            (Path(job_dir) / "logs").mkdir(parents=True, exist_ok=True)
            for rel, text in plan.files.items():
                if rel != slurm_plan.SCRIPT_FILE or job_dir == plan.job_dir:
                    (Path(job_dir) / rel).write_text(text)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_") or k in _KEEP}
        env.update({name: secrets[name] for name in plan.secret_env})
        workdir = plan.payload["workdir"]
        try:
            proc = commands.run(
                slurm_plan.sbatch_argv(plan),
                env=env,
                cwd=workdir if os.path.isdir(workdir) else None,
                check=False,
            )
        except commands.NoAnswer as exc:
            raise SubmitOutcomeUnknown(exc.message) from None
        message = " ".join((proc.stderr or proc.stdout).split())
        if proc.returncode == 0:
            try:
                return parse.job_id(proc.stdout)
            except BackendError as exc:  # accepted, but the id was lost on the way
                raise SubmitOutcomeUnknown(exc.message) from None
        if proc.returncode < 0 or _MAYBE_SUBMITTED in message:
            # Killed midway, or slurmctld's answer timed out: Slurm's own advice is that
            # the job may have been submitted anyway.
            raise SubmitOutcomeUnknown(f"sbatch: {message or f'signal {-proc.returncode}'}")
        raise BackendError(
            f"sbatch failed: {message or f'exit status {proc.returncode}'}", code="SLURM"
        )

    def poll(self, jobs: Sequence[JobRecord]) -> dict[str, Observation]:
        """One squeue for every job; sacct only for jobs slurmctld has already forgotten."""
        from anylaunch.backends.slurm import commands

        natives = [job.native_id for job in jobs if job.native_id]
        if not natives:
            return observe(jobs, {}, {})
        deadline = time.monotonic() + commands.POLL_DEADLINE_S
        silent: str | None = None
        try:
            queue = commands.squeue(natives, timeout=commands.POLL_DEADLINE_S)
        except BackendError as exc:
            queue = {}  # slurmctld unreachable: accounting may still answer
            silent = exc.message
        forgotten = [native for native in natives if native not in queue]
        acct: dict[str, parse.Row] = {}
        if forgotten:
            try:
                # With slurmctld silent, accounting gets only what is left of the deadline.
                wait = commands.TIMEOUT_S if silent is None else deadline - time.monotonic()
                acct = commands.sacct(forgotten, timeout=max(0.5, wait))
            except BackendError:
                acct = {}
        seen = observe(jobs, queue, acct)
        if silent is not None:
            raise Unreachable(silent, observed=seen)
        return seen

    def reconcile(self, jobs: Sequence[JobRecord]) -> Found:
        """Which of these jobs, recorded without a native id, Slurm has anyway.

        Every script carries `--comment=anylaunch:<plan's job id>` (an array's plan is
        its first split's), so one squeue finds them all while slurmctld remembers them
        (MinJobAge after they end). Absent from the answer: never submitted.

        It runs inside a poll (`ps`, `status`), so it waits no longer than the poll's own
        squeue: a silent slurmctld would otherwise hold `ps` for squeue's retries. No
        answer is no verdict: the jobs are asked about again at the next poll.
        """
        from anylaunch.backends.slurm import commands

        known = commands.by_comment(timeout=commands.POLL_DEADLINE_S)
        found: dict[str, tuple[str | None, dict[str, Any]]] = {}
        for job in jobs:
            hit = known.get(str(job.plan.get("job_id", job.id)))
            if hit is None:
                continue
            native, is_array = hit
            requeue = bool(job.plan.get("payload", {}).get("requeue", True))
            if is_array:
                meta = {"requeue": requeue, "array": True, "array_job_id": native}
                found[job.id] = (f"{native}_{job.split_id}", meta)
            else:
                found[job.id] = (native, {"requeue": requeue, "array": False})
        return found

    def cancel(self, job: JobRecord) -> None:
        """scancel, then wait until Slurm reports the job finished (or forgets it)."""
        from anylaunch.backends.slurm import commands

        if not job.native_id:
            return
        commands.run(["scancel", job.native_id])
        deadline = time.monotonic() + CANCEL_WAIT_S
        interval = 0.1
        while time.monotonic() < deadline:
            row = commands.squeue([job.native_id]).get(job.native_id)
            if row is None or states.to_state(row.state, requeue=False).terminal:
                return
            time.sleep(interval)
            interval = min(interval * 1.5, 1.0)
        raise BackendError(
            f"Slurm did not confirm the cancel of {job.native_id} in {CANCEL_WAIT_S:.0f}s"
            f" — check with: squeue -j {job.native_id}",
            code="SLURM",
        )

    def logs(self, job: JobRecord) -> Iterator[LogSource]:
        for rank in range(int(job.plan.get("payload", {}).get("nodes", 1))):
            yield LogSource(node=rank, path=str(Path(job.job_dir) / "logs" / f"node-{rank}.log"))

    # -- a running job's nodes: a step of our own in its allocation (live.py) -------------

    def enter(self, job: JobRecord, node: int, command: Sequence[str], *, tty: bool) -> Entry:
        from anylaunch.backends.slurm import live

        return live.enter(job, node, command, tty=tty)

    def stacks(
        self, job: JobRecord, node: int | None, py_spy: str | None, secret_names: Sequence[str]
    ) -> list[dict[str, Any]]:
        from anylaunch.backends.slurm import live

        return live.stacks(job, node, py_spy, secret_names)

    def relay(self, job: JobRecord, node: int, port: int) -> Relay:
        from anylaunch.backends.slurm import live

        return live.relay(job, node, port)


def observe(
    jobs: Sequence[JobRecord], queue: Mapping[str, parse.Row], acct: Mapping[str, parse.Row]
) -> dict[str, Observation]:
    """What squeue (`queue`) and then accounting (`acct`) say of each job, by native id;
    a job neither names is left out (not seen: its stored state stands)."""
    seen: dict[str, Observation] = {}
    for job in jobs:
        if not job.native_id:
            seen[job.id] = Observation(State.UNKNOWN, detail="not submitted to Slurm")
            continue
        row = queue.get(job.native_id) or acct.get(job.native_id)
        if row is not None:
            seen[job.id] = _observe(row, job)
    return seen


def _observe(row: parse.Row, job: JobRecord) -> Observation:
    requeue = bool(job.meta.get("requeue", True))
    state = states.to_state(row.state, requeue=requeue)
    exit_code = row.exit_code if state.terminal else None
    return Observation(state, exit_code, states.detail(row.state, row.reason, requeue=requeue))


def _workdir(spec: JobSpec) -> str:
    section = spec.slurm
    if section and section.workdir:
        return _relative_to_job_file(spec, section.workdir)
    return os.getcwd()


def _relative_to_job_file(spec: JobSpec, value: str) -> str:
    path = Path(value).expanduser()
    if not path.is_absolute():
        base = Path(spec.source).resolve().parent if spec.source else Path.cwd()
        path = base / path
    return str(path)
