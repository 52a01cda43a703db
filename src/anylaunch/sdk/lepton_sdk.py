"""`LeptonSDK`: the TAO SDK's Lepton surface, on anylaunch's backend and store.

Method names and return shapes follow TAO's SDK, so its callers work unchanged (create_job, list_resource_shapes,
get_volumes, get_storage_permissions, get_job_status, get_job_replicas, get_job_logs,
cancel, get_failure_analysis). Jobs made here are recorded in the anylaunch store like
any other, so `anylaunch ps/logs/cancel` see them, and eviction resubmission applies.
Every method that takes a job id accepts an anylaunch job id or a Lepton job id.

The credentials are this object's: given to the constructor (the environment fills in
only what is not given, read once), and handed to the backend it builds for each
submit and cancel. No call changes `os.environ`.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import httpx

from anylaunch.backends.checks import failed
from anylaunch.backends.lepton import analysis
from anylaunch.backends.lepton.backend import LeptonBackend
from anylaunch.backends.lepton.rest import wire
from anylaunch.backends.lepton.rest.client import Credentials, LeptonClient
from anylaunch.backends.lepton.rest.errors import LeptonAuthError
from anylaunch.backends.lepton.states import sdk_status
from anylaunch.errors import AnylaunchError, JobNotFound, UsageError
from anylaunch.jobfile.secrets import mask
from anylaunch.jobfile.spec import JobSpec
from anylaunch.launch import pipeline, preflight
from anylaunch.launch.resolve import resolve
from anylaunch.observe import watch
from anylaunch.store import Store

FINISHED = frozenset({"Completed", "Failed", "Stopped", "Deleted", "Archived"})


class LeptonSDK:
    def __init__(
        self,
        workspace_id: str | None = None,
        auth_token: str | None = None,
        *,
        workspace_url: str | None = None,
        pending_timeout_s: float = 900.0,
    ) -> None:
        env = dict(os.environ)
        if workspace_id:
            env["LEPTON_WORKSPACE_ID"] = workspace_id
        if auth_token:
            env["LEPTON_AUTH_TOKEN"] = auth_token
        if workspace_url:
            env["LEPTON_WORKSPACE_URL"] = workspace_url
        self.credentials = Credentials.from_env(env)
        self.pending_timeout_s = pending_timeout_s

    def _client(self) -> LeptonClient:
        return LeptonClient(self.credentials)

    def _backend(self) -> LeptonBackend:
        """The Lepton backend on this SDK's credentials, whatever the environment says."""
        return LeptonBackend(client_factory=self._client)

    def _environ(self) -> dict[str, str]:
        """What the preflight checks read: this process's environment (never changed)
        with this SDK's credentials in place of any there."""
        creds = self.credentials
        given = {"LEPTON_WORKSPACE_ID": creds.workspace_id, "LEPTON_AUTH_TOKEN": creds.token}
        return {**os.environ, **given, "LEPTON_WORKSPACE_URL": creds.url}

    # -- submit ---------------------------------------------------------------------

    def create_job(
        self,
        image: str,
        command: str | Sequence[str],
        gpu_count: int | None = None,
        env_vars: Mapping[str, str] | None = None,
        inputs: Mapping[str, str] | None = None,
        outputs: Sequence[str] | Mapping[str, str] | None = None,
        hooks: Mapping[str, Any] | Sequence[str] | None = None,
        *,
        resource_shape: str | None = None,
        dedicated_node_group: str | None = None,
        num_nodes: int = 1,
        mounts: Sequence[Mapping[str, str]] | None = None,
        name: str | None = None,
        launcher: str = "none",
        **lepton: Any,
    ) -> str:
        """Submit and return at once with the job id (anylaunch's; Lepton's is its native id).

        `launcher="none"` is the TAO convention (the command spawns its own ranks and
        reads WORLD_SIZE, NUM_GPU_PER_NODE, MASTER_ADDR ...); "torchrun" wraps it.
        Extra keyword arguments are `lepton:` section fields (priority_class, ...).
        """
        if isinstance(command, str) and launcher == "none":
            command = ["bash", "-c", command]  # TAO's command is a shell line
        section = {
            "gpu_count": gpu_count,
            "num_nodes": num_nodes,
            "resource_shape": resource_shape,
            "dedicated_node_group": dedicated_node_group,
            "mounts": list(mounts) if mounts is not None else None,
            **lepton,
        }
        spec = JobSpec.model_validate(
            {
                "name": name or "lepton-job",
                "image": image,
                "command": command,
                "launcher": launcher,
                "env": dict(env_vars or {}),
                "inputs": dict(inputs or {}),
                "outputs": _outputs(outputs, name or "lepton-job"),
                "hooks": _hooks(hooks),
                "lepton": {k: v for k, v in section.items() if v is not None},
            }
        )
        job = resolve(spec, self._backend())
        checks = preflight.run(job, environ=self._environ())
        if failed(checks):
            raise preflight.PreflightFailed(failed(checks))
        return pipeline.submit(job, Store()).id

    # -- workspace ------------------------------------------------------------------

    def list_resource_shapes(self, node_group_id: str | None = None) -> dict[str, dict[str, Any]]:
        with self._client() as client:
            shapes = client.shapes(_listed_group(client, node_group_id))
        # The TAO SDK's table keys each shape by its id and calls that id `gpu_type`
        # ("gpu.8xh100-sxm"): kept for its callers, and said so. The accelerator model is
        # the API's own field (leptonai api/v2/types/shape.py ShapeSpec.accelerator_type).
        return {
            s.shape_id: {
                "id": s.shape_id,
                "kind": "shape",
                "cluster": s.spec.node_group_id or node_group_id,
                "gpu_type": s.shape_id,
                "accelerator_type": s.spec.accelerator_type,
                "gpu_count": s.spec.accelerator_num or 0,
                "instance_type": s.spec.accelerator_type or "cpu",
                "cpu": s.spec.cpu,
                "memory_in_mb": s.spec.memory_in_mb,
                "description": s.spec.description,
            }
            for s in shapes
        }

    def get_volumes(self, node_group_id: str | None = None) -> list[dict[str, Any]]:
        with self._client() as client:
            wanted = _listed_group(client, node_group_id)
            groups = [client.node_group(wanted)] if wanted else client.node_groups()
        out = []
        for group in groups:
            for volume in group.spec.volumes:
                kind, guessed = _volume_type(volume)
                source = f"node-{volume.from_.lower()}:{volume.name}"
                out.append(
                    {
                        "id": source,
                        "kind": "volume",
                        "name": volume.name,
                        "from_path": volume.from_path,
                        "type": kind,
                        "type_guessed": guessed,
                        "from": source,
                        "mount_path": volume.default_mount_path,
                        "node_group_id": group.metadata.id,
                    }
                )
        return out

    def get_storage_permissions(self, volume_name: str, node_group_id: str) -> list[str]:
        with self._client() as client:
            perms = client.storage_permissions(volume_name, _group_id(client, node_group_id))
        return [p.path_prefix for p in perms]

    # -- one job --------------------------------------------------------------------

    def get_job_status(self, job_id: str) -> dict[str, Any]:
        with self._client() as client:
            job = client.get_job(_native(job_id))
        status = job.status or wire.JobStatus()
        return {
            "job_id": job.metadata.id,
            "status": sdk_status(status.state, job),
            "state": status.state or "UNK",
            "ready": status.ready,
            "active": status.active,
            "succeeded": status.succeeded,
            "failed": status.failed,
        }

    def get_job_replicas(self, job_id: str) -> list[dict[str, Any]]:
        native = _native(job_id)
        with self._client() as client:
            job = client.get_job(native)
            replicas = client.replicas(native)
            events = client.events(native)
            groups = _node_groups_by_node(client)
            shape = next(
                (s for s in client.shapes() if s.shape_id == job.spec.resource_shape), None
            )
        out = []
        for replica in replicas:
            node = (replica.status.node if replica.status else None) or wire.ReplicaNode()
            status: dict[str, Any] = {
                "node": {
                    "name": node.name,
                    "id": node.id,
                    "node_group_id": groups.get(node.id or ""),
                },
                "cpu": shape.spec.cpu if shape else None,
                "memory_in_mb": shape.spec.memory_in_mb if shape else None,
            }
            issue = _readiness_issue(replica.id, events)
            if issue:
                status["readiness_issue"] = issue
            out.append({"id": replica.id, "status": status})
        return out

    def get_job_logs(self, job_id: str, tail: int | None = None) -> str:
        """The last `tail` lines of every replica (all of them without `tail`)."""
        native = _native(job_id)
        with self._client() as client:
            if tail is None:
                job = client.get_job(native)
                lines = client.job_log_lines(native, (job.metadata.created_at or 0) / 1000)
            else:
                now = time.time_ns()
                lines = client.logs(
                    native, start_ns=now - 30 * 86400 * 10**9, end_ns=now, limit=tail,
                    direction="backward",
                )[::-1]  # fmt: skip
        text = "".join(f"{line}\n" for _, _, line in lines)
        return mask(text, [self.credentials.token])

    def stream_job_logs(self, job_id: str, node: int = 0, poll_s: float = 0.5) -> Iterator[str]:
        """Follow one replica's live log until the job ends.

        Lepton's stream can drop mid-run; each connection re-sends the replica's log from
        its start, so after a reconnect we skip what was already yielded.
        """
        native = _native(job_id)
        seen = 0
        with self._client() as client:
            while True:
                replica = next(
                    (
                        r
                        for r in client.replicas(native)
                        if wire.replica_index(r.id, native) == node
                    ),
                    None,
                )
                if replica is not None:
                    text = ""
                    with contextlib.suppress(httpx.TransportError):
                        for chunk in client.stream_replica_log(native, replica.id):
                            text += chunk
                            if len(text) > seen:
                                yield text[seen:]
                                seen = len(text)
                if client.get_job(native).state in FINISHED:
                    return
                time.sleep(poll_s)

    def cancel(self, job_id: str) -> None:
        try:
            job = watch.get(job_id, backend=self._backend())
        except JobNotFound:
            with self._client() as client:
                client.stop_job(job_id)
            return
        job.cancel()

    def get_failure_analysis(self, job_id: str) -> dict[str, Any] | None:
        """Why the job failed or is stuck, with the fix; None when nothing is wrong."""
        native = _native(job_id)
        try:
            with self._client() as client:
                job = client.get_job(native)
                events = client.events(native)
                lines = [
                    (str(labels.get("replica", "")), line)
                    for _, labels, line in client.job_log_lines(
                        native, (job.metadata.created_at or 0) / 1000
                    )
                ]
        except LeptonAuthError as exc:
            return analysis.auth_failure(exc.message)
        return analysis.analyze(
            analysis.Evidence(job, events, lines), pending_timeout_s=self.pending_timeout_s
        )


def _native(job_id: str) -> str:
    """A Lepton job id for an anylaunch job id (its latest attempt), else the id itself."""
    store = Store()
    try:
        record = store.get(job_id)
    except AnylaunchError:
        return job_id
    finally:
        store.close()
    return record.native_id or job_id


def _group_id(client: LeptonClient, wanted: str | None) -> str | None:
    if not wanted:
        return None
    return _match_group(client.node_groups(), wanted) or wanted


def _listed_group(client: LeptonClient, wanted: str | None) -> str | None:
    """The id of the node group named by id or name, for a listing of one group: one
    the workspace does not have is refused, never answered with every group's items."""
    if not wanted:
        return None
    groups = client.node_groups()
    found = _match_group(groups, wanted)
    if found:
        return found
    known = ", ".join(f"{g.metadata.id} ({g.metadata.name})" for g in groups) or "none"
    raise UsageError(
        f"node group '{wanted}' is not in this workspace (its node groups: {known})"
        " — pass one of them, by id or name, to --node-group"
    )


def _match_group(groups: list[wire.NodeGroup], wanted: str) -> str | None:
    """The id of the group whose id or name is `wanted`."""
    for group in groups:
        if wanted in (group.metadata.id, group.metadata.name):
            return group.metadata.id
    return None


def _node_groups_by_node(client: LeptonClient) -> dict[str, str]:
    """node id -> node group id: replicas only name their node, not its group."""
    out = {}
    for group in client.node_groups():
        for node in client.nodes(group.metadata.id or ""):
            out[node.metadata.id or ""] = group.metadata.id or ""
    return out


def _readiness_issue(replica_id: str, events: list[wire.Event]) -> dict[str, str] | None:
    mine = [e for e in events if (e.regarding or {}).get("name") == replica_id]
    reasons = {e.reason: e for e in mine}
    if "FailedMount" in reasons:
        return {"reason": "ConfigError", "message": reasons["FailedMount"].message or ""}
    pull = [e for e in mine if analysis.is_pull_failure(e)]
    if pull:
        return {"reason": "Failed", "message": pull[-1].message or "image pull failed"}
    if "Pulling" in reasons and "Started" not in reasons:
        return {"reason": "InProgress", "message": "Pulling image"}
    if "Unhealthy" in reasons:
        return {"reason": "InProgress", "message": reasons["Unhealthy"].message or "not ready"}
    return None


def _volume_type(volume: wire.Volume) -> tuple[str, bool]:
    """The filesystem kind the TAO SDK reports ("Lustre", "Filestore", ...), and whether
    it is a guess.

    The API does not say: a node group's volume only has `from` (local, remote or nfs;
    leptonai api/v2/types/dedicated_node_group.py VolumeFrom). Lustre and Filestore are
    read from the volume's name or path, and marked as guessed; otherwise the API's
    `from` is all there is.
    """
    text = f"{volume.name} {volume.from_path}".lower()
    for word, kind in (("lustre", "Lustre"), ("filestore", "Filestore")):
        if word in text:
            return kind, True
    return volume.from_.upper(), False


def _outputs(outputs: Sequence[str] | Mapping[str, str] | None, name: str) -> dict[str, str]:
    """Container path -> S3 URI; a bare list of paths goes to S3_BUCKET_NAME (as in TAO's SDK)."""
    if outputs is None:
        return {}
    if isinstance(outputs, Mapping):
        return dict(outputs)
    bucket = os.environ.get("S3_BUCKET_NAME")
    if not bucket:
        raise UsageError(
            "outputs given as paths need S3_BUCKET_NAME — export it, or pass {path: 's3://...'}"
        )
    return {path: f"s3://{bucket}/{name}/{path.strip('/')}" for path in outputs}


def _hooks(hooks: Mapping[str, Any] | Sequence[str] | None) -> dict[str, Any]:
    if hooks is None:
        return {}
    if isinstance(hooks, Mapping):
        return dict(hooks)
    return {"pre": list(hooks)}
