"""The skypilot backend: any cloud (and Slurm over SSH) through SkyPilot's Python SDK.

`plan` renders the task and has the real library validate it; `submit` starts a launch
request on SkyPilot's API server and returns at once (provisioning takes minutes);
`poll` turns finished launch requests into job ids and reads every tracked job with one
request per kind (launch requests, cluster jobs, managed jobs); it reports, and
`watch.refresh` writes what it reports to the store. Native ids:
`request/<id>` while provisioning, `<cluster>/<job id>`, `managed/<job id>`.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from anylaunch.backends.base import (
    Backend,
    Capabilities,
    Entry,
    Found,
    LogSource,
    Observation,
    PlanContext,
    Relay,
    Submitted,
)
from anylaunch.backends.plan import Plan
from anylaunch.backends.skypilot import preflight, sdk, states, validate
from anylaunch.backends.skypilot import task as sky_task
from anylaunch.backends.skypilot.config import SkyPilotSection
from anylaunch.backends.skypilot.task import SkyPilotPayload
from anylaunch.jobfile.spec import JobSpec
from anylaunch.state import State
from anylaunch.store import private

if TYPE_CHECKING:
    from anylaunch.store import JobRecord, Store

REQUEST = "request/"
CANCEL_WAIT_S = 300  # how long cancel waits for a launch request to submit its job
# Each status or log read is an API server request that may ssh into the cluster; `wait`
# and `logs -f` ask several times a second, so answers are reused for this long.
MIN_POLL_S = 3.0
# Per process (get_backend makes a new backend for each call): job id -> (when, answer).
_seen: dict[str, tuple[float, Observation]] = {}
_log_text: dict[str, tuple[float, str]] = {}
MANAGED = "managed/"
# `(head, rank=0, pid=6217) text`, `(worker1, rank=1, pid=6209) text`, `(task, pid=9) text`
_PREFIX = re.compile(r"^\([^()]*?(?:rank=(\d+), )?pid=\d+\) ?")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_NO_RESOURCE = ("ResourcesUnavailableError", "ProvisionError")
_PRECHECK = ("NotSupportedError", "ResourcesMismatchError", "InvalidClusterNameError",
             "CloudUserIdentityError", "NoCloudAccessError", "InvalidSkyPilotConfigError")  # fmt: skip


class SkyPilotBackend(Backend):
    name: ClassVar[str] = "skypilot"
    section: ClassVar[type[BaseModel] | None] = SkyPilotSection
    # With an image, the job runs in it, so the resume step does too. Managed jobs relaunch
    # themselves after preemption; Ctrl-C only detaches (clouds cost minutes to provision,
    # a stray keypress must not throw that away).
    capabilities: ClassVar[Capabilities] = Capabilities(steps_in_image=frozenset({"resume"}))

    def __init__(self) -> None:
        self._accepted: validate.Accepted | None = None

    # -- render ---------------------------------------------------------------------------

    def prepare(
        self, spec: JobSpec, job_id: str, job_dir: str, store: Store, *, reserve: bool = True
    ) -> PlanContext:
        section = spec.skypilot
        workdir = section.workdir if section else None
        if workdir and spec.source and not os.path.isabs(os.path.expanduser(workdir)):
            workdir = str(Path(spec.source).resolve().parent / workdir)
        return PlanContext(job_id=job_id, job_dir=job_dir, values={"workdir": workdir})

    def plan(self, spec: JobSpec, ctx: PlanContext) -> Plan[SkyPilotPayload]:
        rendered = sky_task.render(spec, ctx)
        task = rendered.payload["task"]
        # The splits of a run differ from the task the library last accepted in ways
        # checked without it (validate.Accepted); any other task is validated in full.
        accepted = self._accepted
        if accepted is None or not accepted.covers(task, ctx.job_id):
            validate.validate(task, source=spec.source)
            self._accepted = validate.Accepted(task, ctx.job_id)
        return rendered

    def describe(self, plan: Plan[SkyPilotPayload]) -> str:
        payload = plan.payload
        if payload["mode"] == "managed":
            head = f"# sky jobs launch --name {plan.name} {sky_task.TASK_FILE}"
            head += "   (managed: relaunched after preemption)"
        else:
            head = f"# sky launch -c {payload['cluster_name']} {sky_task.TASK_FILE}"
        if plan.secret_env:
            head += f"\n# secrets from the submitting environment: {', '.join(plan.secret_env)}"
        return f"{head}\n{plan.files[sky_task.TASK_FILE]}"

    def secret_values(self, spec: JobSpec) -> dict[str, str]:
        """The job's secret `env` and skypilot.env_vars' secrets, hf_token and wandb_key
        (`env` wins a name both have)."""
        section = spec.skypilot.secret_env() if spec.skypilot else {}
        return {**section, **spec.secret_env()}

    def preflight(self, spec: JobSpec, *, deep: bool = False) -> list[preflight.Check]:
        checks = preflight.spec_checks(spec)
        return checks + preflight.deep_checks(spec) if deep else checks

    # -- side effects ---------------------------------------------------------------------

    def submit(self, plan: Plan[SkyPilotPayload], secrets: Mapping[str, str]) -> Submitted:
        job_dir = private.folder(plan.job_dir)
        for rel, text in plan.files.items():
            private.write(job_dir / rel, text)
        payload = plan.payload
        task_obj = sdk.task(payload["task"], {name: secrets[name] for name in plan.secret_env})
        cluster = payload["cluster_name"]  # None exactly when managed
        if payload["mode"] == "managed" or cluster is None:
            request = sdk.jobs_launch(task_obj, plan.name)
        else:
            request = sdk.launch(task_obj, cluster)
        return REQUEST + request, _launched(payload, request)

    def reconcile(self, jobs: Sequence[JobRecord]) -> Found:
        """Which of these jobs, recorded without a request id, the API server queued anyway:
        found by the job id its task carries (ANYLAUNCH_JOB_ID in `run`). One call."""
        found: dict[str, tuple[str | None, dict[str, Any]]] = {}
        for request, body in sdk.launch_requests():
            for job in jobs:
                if job.id not in found and f"ANYLAUNCH_JOB_ID={job.id}" in body:
                    found[job.id] = (REQUEST + request, _launched(job.plan["payload"], request))
        return found

    def poll(self, jobs: Sequence[JobRecord]) -> dict[str, Observation]:
        now = time.monotonic()
        fresh = {
            j.id: _seen[j.id][1] for j in jobs if now - _seen.get(j.id, (-1e9,))[0] < MIN_POLL_S
        }
        asked = [j for j in jobs if j.id not in fresh]
        observed = self._poll(asked) if asked else {}
        for job_id, seen in observed.items():
            _seen[job_id] = (now, seen)
        return {**fresh, **observed}

    def _poll(self, jobs: Sequence[JobRecord]) -> dict[str, Observation]:
        out: dict[str, Observation] = {}
        live = [j for j in jobs if j.native_id]
        requests = [j for j in live if (j.native_id or "").startswith(REQUEST)]
        found: dict[str, str] = {}  # job id -> the job a finished launch request started
        if requests:
            resolved, found = self._resolve_requests(requests)
            out.update(resolved)
        # A launch request that handed over its job: that job is polled now, as such.
        live = [replace(j, native_id=found[j.id]) if j.id in found else j for j in live]
        managed = [j for j in live if (j.native_id or "").startswith(MANAGED)]
        clustered = [
            j for j in live if j.native_id and not j.native_id.startswith((REQUEST, MANAGED))
        ]
        if managed:
            out.update(self._poll_managed(managed))
        if clustered:
            out.update(self._poll_clusters(clustered))
        for job in jobs:
            seen = out.setdefault(job.id, Observation(State.UNKNOWN))
            if job.id in found:
                out[job.id] = replace(
                    seen, native_id=found[job.id], expected_native_id=job.native_id
                )
        return out

    def _resolve_requests(
        self, jobs: Sequence[JobRecord]
    ) -> tuple[dict[str, Observation], dict[str, str]]:
        """Launch requests that finished become job ids (the job is then polled below):
        observations of the others, and job id -> native id of those that finished."""
        ids = {j.id: (j.native_id or "").removeprefix(REQUEST) for j in jobs}
        statuses = sdk.request_statuses(list(ids.values()))
        out: dict[str, Observation] = {}
        found: dict[str, str] = {}
        for job in jobs:
            status = statuses.get(ids[job.id])
            if status is None:
                out[job.id] = Observation(State.UNKNOWN, None, "launch request not found")
            elif status == "SUCCEEDED":
                found[job.id] = _native_of(job, sdk.request_result(ids[job.id]))
            elif status == "FAILED":
                out[job.id] = _launch_failure(ids[job.id])
            else:
                detail = "provisioning" if status == "RUNNING" else "waiting for the API server"
                out[job.id] = Observation(states.REQUEST.get(status, State.UNKNOWN), None, detail)
        return out, found

    def _poll_managed(self, jobs: Sequence[JobRecord]) -> dict[str, Observation]:
        ids = {j.id: int((j.native_id or "").removeprefix(MANAGED)) for j in jobs}
        records = sdk.managed_jobs(list(ids.values()))
        out: dict[str, Observation] = {}
        for job in jobs:
            record = records.get(ids[job.id])
            if record is None:
                out[job.id] = Observation(State.UNKNOWN, None, "not in `sky jobs queue`")
                continue
            native = record["status"]
            recoveries = int(record.get("recovery_count") or 0)
            state = states.MANAGED_JOB.get(native, State.UNKNOWN)
            code = 0 if state is State.SUCCEEDED else None
            reason = record.get("failure_reason") if state is State.FAILED else None
            seen = Observation(state, code, states.detail(native, recoveries, reason))
            if recoveries > int(job.meta.get("recoveries", 0)):
                seen = _with_recovery(seen, job, recoveries, native)
            out[job.id] = seen
        return out

    def _poll_clusters(self, jobs: Sequence[JobRecord]) -> dict[str, Observation]:
        where = {j.id: _cluster_job(j) for j in jobs}
        clusters = sdk.cluster_statuses(sorted({c for c, _ in where.values()}))
        asked: dict[str, list[int]] = {}
        for cluster, job_id in where.values():
            if clusters.get(cluster) in ("UP", "INIT"):
                asked.setdefault(cluster, []).append(job_id)
        found = sdk.cluster_job_statuses(asked) if asked else {}
        out: dict[str, Observation] = {}
        for job in jobs:
            cluster, job_id = where[job.id]
            if clusters.get(cluster) not in ("UP", "INIT"):
                # Torn down (autodown, `sky down`) or stopped before we read the result.
                gone = f"cluster {cluster} is {clusters.get(cluster, 'gone').lower()}"
                out[job.id] = Observation(State.FAILED, None, f"{gone}; the job's end was not seen")
                continue
            native = found.get((cluster, job_id))
            if native is None:
                out[job.id] = Observation(State.UNKNOWN, None, f"job {job_id} not on {cluster}")
                continue
            state = states.CLUSTER_JOB.get(native, State.UNKNOWN)
            code = 0 if state is State.SUCCEEDED else None
            out[job.id] = Observation(state, code, states.detail(native))
        return out

    def cancel(self, job: JobRecord) -> None:
        cluster = job.meta.get("cluster_name")
        try:
            native = self._settle_request(job) if (job.native_id or "").startswith(REQUEST) else ""
            native = native or job.native_id or ""
            if native.startswith(REQUEST):
                return  # the launch request was cancelled before it submitted the job
            if native.startswith(MANAGED):
                sdk.cancel_managed(int(native.removeprefix(MANAGED)))
            elif native:
                sdk.cancel_cluster_job(*_cluster_job(replace(job, native_id=native)))
        finally:
            if cluster and job.meta.get("owns_cluster"):
                _quietly(sdk.down, cluster)  # a cluster we named exists only for this job

    def _settle_request(self, job: JobRecord) -> str:
        """The job behind a launch request that is still running, so that it is the job
        that gets cancelled: the request runs on for a while after the job started, and
        cancelling the request then leaves the job running. A cluster anylaunch owns is
        torn down anyway, so its request is cancelled at once; otherwise we wait for the
        request to hand over its job (at most CANCEL_WAIT_S, then cancel the request)."""
        request = (job.native_id or "").removeprefix(REQUEST)
        owned = bool(job.meta.get("owns_cluster"))
        deadline = time.monotonic() + (0 if owned else CANCEL_WAIT_S)
        while True:
            status = sdk.request_statuses([request]).get(request)
            if status == "SUCCEEDED":
                # The job to cancel; the poll after the cancel records it as the job's.
                return _native_of(job, sdk.request_result(request))
            if status in (None, "FAILED", "CANCELLED"):
                return job.native_id or ""
            if time.monotonic() >= deadline:
                sdk.cancel_request(request)
                return job.native_id or ""
            time.sleep(1)

    def logs(self, job: JobRecord) -> Iterator[LogSource]:
        nodes = int(job.plan.get("payload", {}).get("task", {}).get("num_nodes") or 1)
        for index, text in enumerate(split_by_node(self._text(job), nodes)):
            yield LogSource(node=index, text=text)

    def _text(self, job: JobRecord) -> str:
        now = time.monotonic()
        cached = _log_text.get(job.id)
        if cached and now - cached[0] < MIN_POLL_S and not job.state.terminal:
            return cached[1]
        native = job.native_id or ""
        text = ""
        if native.startswith(MANAGED):
            text = sdk.managed_logs(int(native.removeprefix(MANAGED)))
        elif native and not native.startswith(REQUEST):
            text = sdk.cluster_logs(*_cluster_job(job))
        _log_text[job.id] = (now, text)
        return text

    # -- a running job's nodes: the cluster's ssh aliases (live.py) -----------------------

    def enter(self, job: JobRecord, node: int, command: Sequence[str], *, tty: bool) -> Entry:
        from anylaunch.backends.skypilot import live

        return live.enter(job, node, command, tty=tty)

    def stacks(
        self, job: JobRecord, node: int | None, py_spy: str | None, secret_names: Sequence[str]
    ) -> list[dict[str, Any]]:
        from anylaunch.backends.skypilot import live

        return live.stacks(job, node, py_spy, secret_names)

    def relay(self, job: JobRecord, node: int, port: int) -> Relay:
        from anylaunch.backends.skypilot import live

        return live.relay(job, node, port)


def _launched(payload: Mapping[str, Any], request: str) -> dict[str, Any]:
    """What the store keeps of a launch request the API server accepted."""
    return {
        "mode": payload["mode"],
        "cluster_name": payload["cluster_name"],
        "owns_cluster": payload["owns_cluster"],
        "request_id": request,
        "recoveries": 0,
    }


def split_by_node(text: str, nodes: int) -> list[str]:
    """The program's lines per node. SkyPilot prefixes each with `(head, rank=R, pid=P)`
    (`(name, pid=P)` on one node); unprefixed lines are SkyPilot's own progress messages."""
    out: list[list[str]] = [[] for _ in range(nodes)]
    for raw in text.splitlines():
        line = _ANSI.sub("", raw)
        match = _PREFIX.match(line)
        if match is None:
            continue
        rank = int(match.group(1) or 0)
        out[rank if rank < nodes else 0].append(line[match.end() :])
    return ["".join(f"{line}\n" for line in lines) for lines in out]


def _cluster_job(job: JobRecord) -> tuple[str, int]:
    cluster, _, job_id = (job.native_id or "").rpartition("/")
    return cluster, int(job_id)


def _launch_failure(request_id: str) -> Observation:
    try:
        sdk.request_result(request_id)
    except Exception as exc:
        kind = type(exc).__name__
        message = " ".join(str(exc).split())
        if kind in _NO_RESOURCE:
            native = "FAILED_NO_RESOURCE"
        elif kind in _PRECHECK:
            native = "FAILED_PRECHECKS"
        elif "setup" in message.lower():
            native = "FAILED_SETUP"
        else:
            native = "FAILED"
        return Observation(State.FAILED, None, states.detail(native, reason=f"{kind}: {message}"))
    return Observation(State.UNKNOWN)


def _native_of(job: JobRecord, result: Any) -> str:
    """The native id of the job a finished launch request started."""
    job_id, _handle = result
    if job.meta.get("mode") == "managed":
        return f"{MANAGED}{(job_id or [None])[0]}"
    return f"{job.meta['cluster_name']}/{job_id}"


def _with_recovery(seen: Observation, job: JobRecord, recoveries: int, native: str) -> Observation:
    """One event per recovery, so `status` shows how often a spot job came back."""
    detail = f"recovery {recoveries}: preempted or failed; SkyPilot relaunched it ({native})"
    return replace(
        seen,
        native_id=job.native_id,
        expected_native_id=job.native_id,
        meta={**job.meta, "recoveries": recoveries},
        events=(detail,),
        attempt=True,
    )


def _quietly(func: Any, *args: Any) -> None:
    try:
        func(*args)
    except Exception:  # best effort: the job is already stopped
        return
