"""One emulated job's life: Queueing -> Starting -> Running -> Completed/Failed/Stopped.

`advance()` is called by the world's loop about ten times a second; it reaps replicas,
fires the job's faults when their time comes, applies Lepton's retry rules
(`max_failure_retry` per worker, `max_job_failure_retry` per job) and keeps the counters
(`ready`, `active`, `failed`, `succeeded`) and the Kubernetes-style events a client sees.
"""

from __future__ import annotations

import datetime as dt
import os
import posixpath
import secrets
import string
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lepton_emulator import catalog, images, network, sandbox
from lepton_emulator.faults import Fault
from lepton_emulator.network import Endpoint, JobNetwork
from lepton_emulator.replicas import Replica

# Without namespaces there are no images: replicas run on this machine, as they used to.
_HOST_PATH = f"{Path(sys.executable).parent}:{images.SYSTEM_PATH}"
TERMINAL = frozenset({"Completed", "Failed", "Stopped", "Deleted", "Archived"})
_ALNUM = string.ascii_lowercase + string.digits


def _escapes(top: Path, rel: str) -> str | None:
    """Why the folder `rel` of a volume rooted at `top` cannot be mounted: it leads out of
    the volume (a symlink a job left there), or is not a folder. Made if missing."""
    host = top / rel.lstrip("/")
    try:
        top.mkdir(parents=True, exist_ok=True)
        inside = os.path.realpath(host)
        if os.path.commonpath([inside, os.path.realpath(top)]) != os.path.realpath(top):
            return "leads out of its volume (a symbolic link)"
        host.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot be made a folder ({exc.strerror})"
    return None


def suffix(n: int) -> str:
    return "".join(secrets.choice(_ALNUM) for _ in range(n))


@dataclass
class JobRun:
    id: str
    name: str
    owner: str
    workspace: str
    metadata: dict[str, Any]
    spec: dict[str, Any]
    faults: list[Fault]
    slot: int
    root: Path  # this job's directory in the emulator's state
    volumes: Path  # the node groups' volumes: <volumes>/<volume name>/<path in volume>
    secrets: dict[str, str]  # resolved secret values, for the replicas' environment
    pull_secret_ok: bool = False  # an image_pull_secrets entry names a secret for nvcr.io
    outside: tuple[Endpoint, ...] = ()  # host endpoints standing in for the internet
    net: JobNetwork | None = None  # the job's network namespace, made for its first replica
    created_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    state: str = "Queueing"
    since: float = field(default_factory=time.time)
    replicas: list[Replica] = field(default_factory=list)
    failed: int = 0
    succeeded: int = 0
    failure_count: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    events: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    completion_ms: int | None = None
    running_since: float | None = None
    restart_at: float | None = None

    # -- what clients see -----------------------------------------------------------

    @property
    def workers(self) -> int:
        return int(self.spec.get("completions") or 1)

    def fault(self, kind: str) -> Fault | None:
        return next((f for f in self.faults if f.kind == kind), None)

    def status(self) -> dict[str, Any]:
        state = self.state
        unknown = self.fault("unknown_state")
        if unknown and time.time() - self.created_ms / 1000 < unknown.after_s:
            state = ""
        return {
            **self._details(state),
            "job_history": list(self.history),
        }

    def _details(self, state: str) -> dict[str, Any]:
        live = [r for r in self.replicas if r.exit_code is None]
        return {
            "job_name": self.id if self.failure_count == 0 else f"{self.id}-{self.failure_count}",
            "state": state,
            "ready": sum(1 for r in live if r.ready),
            "active": len(live),
            "failed": self.failed,
            "succeeded": self.succeeded,
            "creation_time": self.created_ms // 1000,
            "completion_time": self.completion_ms // 1000 if self.completion_ms else None,
        }

    def as_json(self) -> dict[str, Any]:
        return {"metadata": self.metadata, "spec": self.spec, "status": self.status()}

    def replica_json(self) -> list[dict[str, Any]]:
        if self.state in ("Queueing", "Stopped", "Deleted", "Archived"):
            return []
        return [
            {
                "metadata": {"id": r.id, "name": r.id},
                "id": r.id,
                "status": {"public_ip": r.address, "node": {"name": r.node, "id": r.node}},
            }
            for r in self.replicas
        ]

    def event(self, kind: str, reason: str, message: str, pod: str | None = None) -> None:
        """Record a Kubernetes-style event; a repeat raises its count, like k8s does."""
        key = (reason, pod or self.id)
        now = dt.datetime.now(dt.timezone.utc).isoformat().replace("+00:00", "Z")
        found = self.events.get(key)
        if found:
            found["count"] += 1
            found["last_observed_time"], found["message"] = now, message
            return
        self.events[key] = {
            "type": kind,
            "reason": reason,
            "regarding": {"kind": "Pod" if pod else "Job", "name": pod or self.id},
            "count": 1,
            "last_observed_time": now,
            "message": message,
        }

    def move(self, state: str) -> None:
        if state != self.state:
            self.state, self.since = state, time.time()
            if state in ("Completed", "Failed", "Stopped"):
                self.completion_ms = int(time.time() * 1000)
            if state in TERMINAL:
                self._drop_network()

    def _enter_network(self) -> list[str]:
        """The argv prefix that puts a replica in this job's network (none without root)."""
        if not network.works():
            return []
        if self.net is None:
            self.net = JobNetwork(self.outside)
        return self.net.enter()

    def _drop_network(self) -> None:
        if self.net is not None:
            self.net.close()
            self.net = None

    # -- the loop -------------------------------------------------------------------

    def advance(self) -> None:
        now = time.time()
        if self.state in TERMINAL or self.state in ("Stopping", "Deleting"):
            return
        if self.state == "Queueing":
            unplaced = self._unplaceable()
            if self.fault("stuck_queue") or unplaced:
                if int(now - self.since) + 1 > self.events.get(
                    ("FailedScheduling", self.id), {}
                ).get("count", 0):
                    self.event(
                        "Warning",
                        "FailedScheduling",
                        unplaced
                        or f"0/4 nodes are available: {self.workers} Insufficient"
                        " nvidia.com/gpu; preemption: not eligible",
                    )
                return
            self.move("Starting")
            return
        if self.state == "Restarting":
            if self.restart_at is not None and now >= self.restart_at:
                self.replicas = []
                self.move("Starting")
            return
        if not self.replicas:
            if now - self.since > 0.1:
                self._schedule()
            return
        self._fire_timed_faults(now)
        for replica in self.replicas:
            self._blocked_events(replica)
            if replica.reap():
                self._replica_ended(replica)
                if self.state in TERMINAL or self.state == "Restarting":
                    return
        if all(r.exit_code == 0 for r in self.replicas):
            self.succeeded = len(self.replicas)
            self.event("Normal", "Completed", "Job completed")
            self.move("Completed")
        elif any(r.running for r in self.replicas):
            if self.state != "Running":
                self.running_since = now
            self.move("Running")

    def _nodes(self) -> tuple[list[str], list[str]]:
        """The ids of the nodes of the job's node group (or the shared pool), and of those
        its affinity allows (`allowed_nodes_in_node_group`; every one when it names none)."""
        affinity = self.spec.get("affinity") or {}
        groups = affinity.get("allowed_dedicated_node_groups") or []
        every = [
            n["metadata"]["id"] for n in catalog.nodes(groups[0] if groups else catalog.SHARED_POOL)
        ]
        named = affinity.get("allowed_nodes_in_node_group")
        return every, [n for n in every if n in named] if named else every

    def _unplaceable(self) -> str | None:
        """Why the workers do not fit on the allowed nodes, as the scheduler says it (a
        replica takes its shape's GPUs of a node's 8); None when they fit. Other jobs'
        replicas are not counted: each job has the node group to itself here."""
        every, allowed = self._nodes()
        shape = catalog.shape(str(self.spec.get("resource_shape") or "")) or {}
        gpus = int((shape.get("spec") or {}).get("accelerator_num") or 0)
        per_node = catalog.NODE_GPUS // gpus if gpus else self.workers
        if len(allowed) * per_node >= self.workers:
            return None
        other = len(every) - len(allowed)
        return (
            f"0/{len(every)} nodes are available: {other} node(s) didn't match Pod's node"
            f" affinity/selector, {len(allowed)} Insufficient nvidia.com/gpu."
            " preemption: not eligible"
        )

    def _schedule(self) -> None:
        """Place the workers on the allowed nodes, in turn, and start the ones that can."""
        _, nodes = self._nodes()
        addresses = sandbox.job_addresses(self.slot, self.workers)
        for i in range(self.workers):
            replica = Replica(
                id=f"{self.id}-{i}-{suffix(5)}",
                index=i,
                node=nodes[i % len(nodes)],
                address=addresses[i],
            )
            replica.blocked = self._blocked_reason(i)
            self.event(
                "Normal", "Scheduled", f"Successfully assigned to {replica.node}", replica.id
            )
            self.replicas.append(replica)
            if replica.blocked is None:
                self._start(replica)

    def _names(self, index: int) -> list[str]:
        """Worker `index`'s names in the job's service subdomain, then its hostname."""
        subdomain = f"{self.id}-job-svc"
        return [f"worker-{index}.{subdomain}", f"{self.id}-{index}.{subdomain}", f"worker-{index}"]

    def _hosts_file(self, replica: Replica) -> Path:
        """The replica's /etc/hosts: its own names always, as the kubelet writes a pod's;
        the other workers' only with intra-job communication (their DNS records on
        Lepton), so without it workers cannot find each other, as on Lepton."""
        others = []
        if self.spec.get("intra_job_communication"):
            addresses = sandbox.job_addresses(self.slot, self.workers)
            others = [
                (addresses[i], self._names(i)[:2])
                for i in range(self.workers)
                if i != replica.index
            ]
        path = self.root / f"hosts-{replica.index}"
        return sandbox.write_hosts(path, (replica.address, self._names(replica.index)), others)

    def _blocked_reason(self, index: int) -> str | None:
        if self.fault("image_pull") or self._pull_problem() is not None:
            return "image_pull"
        if self._mount_problem() is not None:
            return "mount_error"
        for kind in ("never_ready", "mount_error"):
            fault = self.fault(kind)
            if fault and fault.worker == index:
                return kind
        return None

    @property
    def image(self) -> str:
        return str((self.spec.get("container") or {}).get("image") or "")

    def _pull_problem(self) -> str | None:
        """Why the image cannot be pulled: unknown here, or private without a secret."""
        found = images.lookup(self.image)
        if found is None:
            return f'Failed to pull image "{self.image}": manifest unknown: not found or no access'
        if found.private and not self.pull_secret_ok:
            return (
                f'Failed to pull image "{self.image}": 401 Unauthorized'
                " (check the image pull secret)"
            )
        return None

    def _mounts(self) -> list[tuple[Path, str, str | None]]:
        """(host directory, container path, why it cannot be mounted) for each mount."""
        groups = (self.spec.get("affinity") or {}).get("allowed_dedicated_node_groups") or []
        out = []
        for mount in self.spec.get("mounts") or []:
            source, target = str(mount["from"]), str(mount["mount_path"])
            path = posixpath.normpath("/" + str(mount.get("path") or "/").lstrip("/"))
            if source == "node-local":
                top = self.volumes / "node-local" / self.id
                out.append((top / path.lstrip("/"), target, _escapes(top, path)))
                continue
            volume = source.partition(":")[2]
            base = catalog.volume_from_path(volume)
            rel = path[len(base) :] if path == base or path.startswith(base + "/") else path
            top = self.volumes / volume
            allowed = any(
                path == p["path_prefix"] or path.startswith(p["path_prefix"].rstrip("/") + "/")
                for p in catalog.storage_permissions(volume, groups[0] if groups else None)
            )
            why = None if allowed else "is outside the storage permissions of this workspace"
            out.append((top / rel.lstrip("/"), target, why or _escapes(top, rel)))
        return out

    def _mount_problem(self) -> str | None:
        for mount, (_, _, why) in zip(self.spec.get("mounts") or [], self._mounts(), strict=True):
            if why is not None:
                path = str(mount.get("path") or "/")
                return f"MountVolume.SetUp failed for {mount['from']}: {path} {why} (permission denied)"
        return None

    def _start(self, replica: Replica) -> None:
        command = (self.spec.get("container") or {}).get("command") or ["/bin/bash", "-c", "true"]
        found = images.lookup(self.image)
        profile = images.profile(found.profile if found else "bare")
        self.event("Normal", "Pulled", f'Container image "{self.image}" present', replica.id)
        self.event("Normal", "Started", "Started container main", replica.id)
        home = self.root / replica.id
        try:
            enter = self._enter_network()
        except OSError as exc:  # never fall back to the host's network: say why, exit 127
            self.event("Warning", "FailedCreatePodSandBox", f"network: {exc}", replica.id)
            replica.lines.append((time.time_ns(), f"cannot create the pod network: {exc}"))
            replica.exit_code = 127
            return
        replica.start(
            enter
            + sandbox.wrap(
                command,
                root=self.root / f".root-{replica.id}",
                hosts=self._hosts_file(replica),
                hostname=self._names(replica.index)[-1],
                image=profile,
                etc=images.image_etc(),
                home=home,
                # Bound by their resolved paths: what was checked is what is mounted.
                mounts=[(Path(os.path.realpath(h)), target) for h, target, _ in self._mounts()],
            ),
            self._env(replica, profile.path if sandbox.namespaces_work() else _HOST_PATH),
            home,
        )

    def _env(self, replica: Replica, path: str) -> dict[str, str]:
        shape = catalog.shape(self.spec.get("resource_shape") or "") or {"spec": {}}
        env = {
            "PATH": path,
            "HOME": str(self.root / replica.id),
            "LANG": "C.UTF-8",
            "PYTHONUNBUFFERED": "1",
        }
        for item in self.spec.get("envs") or []:
            ref = (item.get("value_from") or {}).get("secret_name_ref")
            env[item["name"]] = self.secrets.get(ref, "") if ref else str(item.get("value") or "")
        env.update(
            {
                "LEPTON_JOB_NAME": self.id,
                "LEPTON_JOB_SERVICE_PREFIX": self.id,
                "LEPTON_SUBDOMAIN": f"{self.id}-job-svc",
                "LEPTON_JOB_WORKER_PREFIX": "worker",
                "LEPTON_JOB_WORKER_HOSTNAME_PREFIX": "worker",
                "LEPTON_JOB_TOTAL_WORKERS": str(self.workers),
                "LEPTON_JOB_WORKER_INDEX": str(replica.index),
                "LEPTON_WORKER_ID": replica.id,
                "LEPTON_JOB_FAILURE_COUNT": str(self.failure_count),
                "LEPTON_WORKSPACE_ID": self.workspace,
                "LEPTON_RESOURCE_ACCELERATOR_TYPE": shape["spec"].get("accelerator_type") or "",
                "LEPTON_RESOURCE_ACCELERATOR_NUM": str(shape["spec"].get("accelerator_num") or 0),
                "LEPTON_VIRTUAL_ENV": "/opt/lepton/venv",  # the value the docs show
            }
        )
        return env

    def _blocked_events(self, replica: Replica) -> None:
        image = (self.spec.get("container") or {}).get("image") or ""
        if replica.blocked == "image_pull":
            self.event("Normal", "Pulling", f'Pulling image "{image}"', replica.id)
            self.event(
                "Warning",
                "Failed",
                self._pull_problem()
                or f'Failed to pull image "{image}": 401 Unauthorized (check the image pull secret)',
                replica.id,
            )
            self.event("Warning", "BackOff", f'Back-off pulling image "{image}"', replica.id)
        elif replica.blocked == "mount_error":
            self.event(
                "Warning",
                "FailedMount",
                self._mount_problem()
                or "MountVolume.SetUp failed: mount point not found on node " + replica.node,
                replica.id,
            )
        elif replica.blocked == "never_ready":
            self.event(
                "Warning", "Unhealthy", "Readiness probe failed: container not ready", replica.id
            )

    def _fire_timed_faults(self, now: float) -> None:
        evict = self.fault("evict")
        if evict and self.running_since and now - self.running_since >= evict.after_s:
            preemptible = (self.spec.get("queue_config") or {}).get("can_be_preempted")
            reason = "Preempted" if preemptible else "Evicted"
            for replica in self.replicas:
                if replica.running:
                    replica.kill("evict")
                    self.event(
                        "Warning",
                        reason,
                        f"Pod was {reason.lower()}: the shared node group {replica.node} "
                        "reclaimed its resources for a higher-priority workload",
                        replica.id,
                    )
            self.faults.remove(evict)
        for kind in ("oom", "exit"):
            fault = self.fault(kind)
            if not fault or fault.worker >= len(self.replicas):
                continue
            replica = self.replicas[fault.worker]
            if replica.running and replica.started_at and now - replica.started_at >= fault.after_s:
                replica.kill(kind)
                replica.forced_exit = fault.exit_code
                if kind == "oom":
                    pid = replica.proc.pid if replica.proc else 0
                    self.event(
                        "Warning",
                        "OOMKilled",
                        f"OOM encountered, victim process: python, pid: {pid}",
                        replica.id,
                    )
                self.faults.remove(fault)

    def _replica_ended(self, replica: Replica) -> None:
        code = replica.exit_code
        if replica.killed_for == "exit" and replica.forced_exit is not None:
            replica.exit_code = code = replica.forced_exit
        if code == 0:
            return
        self.failed += 1
        if replica.killed_for == "evict":
            if all(not r.running for r in self.replicas):
                self._job_failed("evicted")
            return
        self.event(
            "Warning",
            "BackOff",
            f"Container main exited with code {code}"
            + (" (OOMKilled)" if replica.killed_for == "oom" else ""),
            replica.id,
        )
        if replica.restarts < int(self.spec.get("max_failure_retry") or 0):
            replica.restarts += 1
            replica.lines.append(
                (time.time_ns(), f"--- restart {replica.restarts} of this worker ---")
            )
            self._start(replica)
            return
        self._job_failed(f"worker {replica.index} exited with code {code}")

    def _job_failed(self, why: str) -> None:
        for replica in self.replicas:
            replica.kill("failure")
        for replica in self.replicas:
            if replica.proc is not None:
                replica.proc.wait(timeout=10)
                replica.reap()
        if self.failure_count < int(self.spec.get("max_job_failure_retry") or 0):
            self.history.append(self._details("Failed"))
            self.failure_count += 1
            self.event("Warning", "Restarting", f"Job attempt failed ({why}); restarting")
            self.restart_at = time.time() + 0.5
            self.move("Restarting")
            return
        self.event("Warning", "BackoffLimitExceeded", f"Job has failed: {why}")
        self.move("Failed")

    def stop(self) -> None:
        self.move("Stopping")
        for replica in self.replicas:
            replica.kill("stop", grace=2.0)
        for replica in self.replicas:
            if replica.proc is not None:
                replica.proc.wait(timeout=10)
                replica.reap()
        self.event("Normal", "Stopped", "Job stopped by user")
        self.move("Stopped")

    def resume(self) -> None:
        self.replicas = []
        self.completion_ms = None
        self.move("Starting")

    def end(self) -> None:
        for replica in self.replicas:
            replica.kill("delete")
        self._drop_network()
