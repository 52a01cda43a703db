"""The Slurm backend: sbatch to submit, one squeue (+ at most one sacct) to poll many jobs.

On a login node (no `slurm.login`), the job's directory (under `$ANYLAUNCH_HOME/jobs/`)
holds the script and every node's log, so it must be on a filesystem the compute nodes
share with the submitting host — as home directories are on most clusters.

With `slurm.login` (or ANYLAUNCH_SLURM_LOGIN) the cluster is reached over ssh
(`login.py`): the job's folder is made here and copied to the cluster's job root
(`remote.py`), every Slurm command runs on the login node through one shared connection,
and the logs are mirrored back into the job's folder here. Each job's plan names its
login, so jobs of several clusters are polled together, one round trip per cluster.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
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
from anylaunch.backends.slurm import cluster, continuation, states
from anylaunch.backends.slurm import plan as slurm_plan
from anylaunch.backends.slurm.config import SlurmSection
from anylaunch.backends.slurm.login import Login
from anylaunch.backends.slurm.plan import SlurmPayload
from anylaunch.errors import BackendError, ConfigError, SubmitOutcomeUnknown
from anylaunch.jobfile.spec import JobSpec
from anylaunch.observe.reachability import Unreachable
from anylaunch.state import State
from anylaunch.store import private

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
        launchers=frozenset({"torchrun", "srun", "none"}),
        watchdog=True,
        snapshot=True,
        continues_in_job=True,
        avoids_nodes=True,
    )

    # -- rendering ------------------------------------------------------------------------

    def prepare(
        self, spec: JobSpec, job_id: str, job_dir: str, store: Store, *, reserve: bool = True
    ) -> PlanContext:
        """The script's template, and where the job lives and runs from. A remote job's
        folder on the cluster is under its home folder unless `slurm.job_dir` is absolute:
        the login node is asked for it once per process."""
        section = spec.slurm
        via = cluster.login_of(spec)
        snapshot = spec.snapshot.enabled if spec.snapshot else via is not None
        code_dir = _workdir(spec)
        # The folder the job's code comes from, here: none for a remote job run from a
        # folder of the cluster.
        here = code_dir if snapshot or via is None else None
        values: dict[str, Any] = {"snapshot": snapshot, "code_dir": here}
        if via is not None:
            values.update(_remote_places(spec, via, job_id, snapshot))
        else:
            values["workdir"] = f"{job_dir}/snapshot" if snapshot else code_dir
        if spec.watchdog is not None and via is None:
            from anylaunch.node import runtime

            # The watchdog's py-spy, where the nodes see it (this machine's path means
            # nothing on a cluster reached over ssh: there the nodes' PATH has it).
            values["py_spy"] = runtime.py_spy()
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
        if section and section.job_dir and via is None:
            # AutoModel's job_dir: the job's files (script, recipe, logs) go under it, on
            # the shared filesystem the nodes see, one folder per job.
            job_dir = str(Path(_relative_to_job_file(spec, section.job_dir)) / job_id)
            if snapshot:
                values["workdir"] = f"{job_dir}/snapshot"
        return PlanContext(job_id=job_id, job_dir=job_dir, values=values)

    def keep_off(self, spec: JobSpec, ctx: PlanContext, hosts: Sequence[str]) -> PlanContext:
        """The next attempt asks sbatch for nodes other than `hosts` (`--exclude`)."""
        return replace(ctx, values={**ctx.values, "exclude": list(hosts)})

    def hosts(self, job: JobRecord) -> list[str]:
        """The nodes the job's current Slurm job ran on, node 0 first (the order of
        SLURM_NODEID), from accounting; none when Slurm does not say."""
        from anylaunch.backends.slurm import commands

        if not job.native_id:
            return []
        via = cluster.login_in(job.plan.get("payload", {}))
        argv = ["sacct", "-j", job.native_id, "-X", "-n", "-P", "-o", "NodeList"]
        try:
            listed = commands.run(argv, check=False, via=via).stdout.split()
            if not listed or listed[-1] in {"None", "(null)"}:
                return []
            proc = commands.run(["scontrol", "show", "hostnames", listed[-1]], via=via)
        except BackendError:  # unanswered: the failure is pinned on no node
            return []
        return proc.stdout.split()

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
                "job_dir": c.values.get("run_dir", c.job_dir),
                "value": values_of[i] if i < len(values_of) else None,
                "attempt": c.values.get("attempt", 1),
                "env": dict(c.values.get("per_job_env", {})),
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
        from anylaunch.backends.slurm import commands

        via = cluster.login_in(plan.payload)
        if via is not None:
            return self._sbatch_remote(plan, secrets, via)
        job_dirs = [s["job_dir"] for s in plan.payload["splits"]] or [plan.job_dir]
        for job_dir in job_dirs:
            # sbatch fails a job whose --output directory is missing (ExitCode 0:53).
            # Only this user may read them: logs hold what the program printed.
            private.folder(job_dir)
            private.folder(Path(job_dir) / "logs")
            for rel, text in plan.files.items():
                if rel != slurm_plan.SCRIPT_FILE or job_dir == plan.job_dir:
                    private.write(Path(job_dir) / rel, text)
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
        return _submitted(proc)

    def _sbatch_remote(
        self, plan: Plan[SlurmPayload], secrets: Mapping[str, str], via: Login
    ) -> str:
        """Copy the job's folder (made here) to the cluster, then sbatch there; the
        secrets reach sbatch through ssh's stdin (`Login.run`), never a file or a
        command line. The other splits of an array make their folders themselves."""
        from anylaunch.backends.slurm import commands, remote

        local = Path(plan.job_dir)
        (local / "logs").mkdir(parents=True, exist_ok=True)
        for rel, text in plan.files.items():
            (local / rel).write_text(text)
        remote.push(via, local, plan.payload["run_dir"])
        try:
            proc = commands.run(
                slurm_plan.sbatch_argv(plan),
                env={name: secrets[name] for name in plan.secret_env},
                check=False,
                via=via,
            )
        except (commands.NoAnswer, commands.Disconnected) as exc:
            # The connection broke or went silent with sbatch under way: the job may be
            # queued. Its script's --comment finds it at the next poll.
            raise SubmitOutcomeUnknown(exc.message) from None
        return _submitted(proc, where=f" on {via.text}")

    def poll(self, jobs: Sequence[JobRecord]) -> dict[str, Observation]:
        """One squeue for every job of a cluster (one round trip for a remote one); sacct
        only for jobs slurmctld has already forgotten."""
        seen: dict[str, Observation] = {}
        silent: list[str] = []
        for via, group in _by_login(jobs).items():
            observed, why = _poll_cluster(group, via)
            seen.update(observed)
            if why is not None:
                silent.append(why)
        if silent:
            raise Unreachable("; ".join(silent), observed=seen)
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

        known: dict[str, tuple[str, bool]] = {}
        for via, group in _by_login(jobs).items():
            answer = commands.by_comment(timeout=commands.poll_deadline(via), via=via)
            names = {str(job.plan.get("job_id", job.id)) for job in group}
            known.update({name: hit for name, hit in answer.items() if name in names})
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
        via = cluster.login_in(job.plan.get("payload", {}))
        commands.run(["scancel", job.native_id], via=via)
        deadline = time.monotonic() + CANCEL_WAIT_S
        interval = 0.1
        while time.monotonic() < deadline:
            row = commands.squeue([job.native_id], via=via).get(job.native_id)
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
        """Each node's log file in the job's folder; a remote job's copies are brought up
        to date first (not once the job has been over for a while: they are whole)."""
        payload = job.plan.get("payload", {})
        nodes = int(payload.get("nodes", 1))
        paths = [Path(job.job_dir) / "logs" / f"node-{rank}.log" for rank in range(nodes)]
        via = cluster.login_in(payload)
        if via is not None and not _logs_whole(job):
            _mirror_logs(job, via, paths)
        for rank, path in enumerate(paths):
            yield LogSource(node=rank, path=str(path))

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


def _by_login(jobs: Sequence[JobRecord]) -> dict[Login | None, list[JobRecord]]:
    groups: dict[Login | None, list[JobRecord]] = {}
    for job in jobs:
        groups.setdefault(cluster.login_in(job.plan.get("payload", {})), []).append(job)
    return groups


def _poll_cluster(
    jobs: Sequence[JobRecord], via: Login | None
) -> tuple[dict[str, Observation], str | None]:
    """The jobs of one cluster: one squeue, then sacct for the ones it forgot; and why
    the cluster did not answer, if it did not."""
    from anylaunch.backends.slurm import commands

    natives = [job.native_id for job in jobs if job.native_id]
    if not natives:
        return observe(jobs, {}, {}), None
    limit = commands.poll_deadline(via)
    deadline = time.monotonic() + limit
    silent: str | None = None
    try:
        queue = commands.squeue(natives, timeout=limit, via=via)
    except BackendError as exc:
        queue = {}  # slurmctld unreachable: accounting may still answer
        silent = exc.message
    forgotten = [native for native in natives if native not in queue]
    acct: dict[str, parse.Row] = {}
    if forgotten:
        try:
            # With slurmctld silent, accounting gets only what is left of the deadline.
            wait = commands.TIMEOUT_S if silent is None else deadline - time.monotonic()
            acct = commands.sacct(forgotten, timeout=max(0.5, wait), via=via)
        except BackendError:
            acct = {}
    if via is not None and silent is None:
        _mirror_attempts(jobs, via)
    return observe(jobs, queue, acct), silent


def _mirror_attempts(jobs: Sequence[JobRecord], via: Login) -> None:
    """Bring the local copies of the attempts that remote jobs record of themselves
    (`continuation.FILE`, appended to by each run) up to date, one round trip for all;
    unanswered, the next poll asks again."""
    from anylaunch.backends.slurm import remote

    pairs = []
    for job in jobs:
        run_dir = job.plan.get("payload", {}).get("run_dir", "")
        if run_dir and job.native_id and isinstance(job.spec.get("retry"), dict):
            own = posixpath.join(posixpath.dirname(run_dir), job.id)
            pairs.append((f"{own}/{continuation.FILE}", Path(job.job_dir) / continuation.FILE))
    with contextlib.suppress(BackendError):
        remote.read_logs(via, pairs)


def _submitted(proc: Any, where: str = "") -> str:
    """The job id sbatch printed; SubmitOutcomeUnknown when it may have queued the job
    without saying so, BackendError when it refused it."""
    from anylaunch.backends.slurm import parse

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
        f"sbatch failed{where}: {message or f'exit status {proc.returncode}'}", code="SLURM"
    )


# A job's logs are copied until it has been over this long: by then the cluster's
# filesystem holds every line the nodes wrote.
_SETTLED_S = 10.0
_WHOLE = ".whole"


def _logs_whole(job: JobRecord) -> bool:
    return (Path(job.job_dir) / "logs" / _WHOLE).exists()


# A live job's logs are copied at most this often by one process: `logs -f` asks many
# times a second, and each copy is a round trip to the cluster.
_COPY_EVERY_S = 0.25
_copied: dict[str, float] = {}  # job id -> when this process last copied its logs


def _mirror_logs(job: JobRecord, via: Login, paths: Sequence[Path]) -> None:
    """Bring the local copies of a remote job's logs up to date, one round trip; for a
    live job, not again within `_COPY_EVERY_S` (an ended one is always copied: its last
    lines must be read)."""
    from anylaunch.backends.slurm import remote

    now = time.monotonic()
    if not job.state.terminal and now - _copied.get(job.id, -_COPY_EVERY_S) < _COPY_EVERY_S:
        return
    run_dir = job.plan.get("payload", {}).get("run_dir", "")
    # The folders of an array's jobs sit side by side, named by their job ids.
    own = posixpath.join(posixpath.dirname(run_dir), job.id) if run_dir else ""
    pairs = [(f"{own}/logs/{path.name}", path) for path in paths]
    over = job.state.terminal and time.time() - job.updated_at > _SETTLED_S
    remote.read_logs(via, pairs)
    _copied[job.id] = now
    if over:
        (Path(job.job_dir) / "logs" / _WHOLE).touch()


def _remote_places(spec: JobSpec, via: Login, job_id: str, snapshot: bool) -> dict[str, Any]:
    """Where a remote job lives on the cluster (`run_dir`) and runs from (`workdir`)."""
    from anylaunch.backends.slurm import remote

    section = spec.slurm or SlurmSection()
    root = section.job_dir or remote.DEFAULT_ROOT
    home = _home(via) if not root.startswith("/") else ""
    run_dir = f"{remote.expand(root, home)}/{job_id}"
    if snapshot:
        workdir = f"{run_dir}/snapshot"
    elif section.workdir:
        where = section.workdir
        if not where.startswith("/"):
            home = home or _home(via)
        workdir = remote.expand(where, home)
    else:
        raise ConfigError(
            "a job on a cluster reached over ssh runs from a snapshot of this folder, or"
            " from a folder on the cluster: snapshot is off and slurm.workdir names none",
            file=spec.source,
            key="slurm.workdir",
            fix="set slurm.workdir to the folder on the cluster (absolute, or ~/...), or"
            " remove snapshot: false",
        )
    return {"login": via.text, "run_dir": run_dir, "workdir": workdir}


_homes: dict[str, str] = {}  # login -> its home folder, asked once per process


def _home(via: Login) -> str:
    if via.text not in _homes:
        home = via.output(["printenv", "HOME"]).strip()
        if not home.startswith("/"):
            raise BackendError(
                f"{via.text} did not say where its home folder is ({home!r}) — set"
                " slurm.job_dir to an absolute folder on the cluster",
                code="SSH",
            )
        _homes[via.text] = home
    return _homes[via.text]


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
    retry = job.spec.get("retry") if isinstance(job.spec, dict) else None
    # A job that may continue itself records its attempts in its folder.
    attempts = continuation.read(job) if isinstance(retry, dict) else ()
    detail = states.detail(row.state, row.reason, requeue=requeue)
    return Observation(state, exit_code, detail, attempts=attempts)


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
