"""The Lepton job API's JSON shapes (SDK 0.47.1 types), as pydantic models.

Responses are parsed leniently (`extra="allow"`): the real gateway adds fields over time
and a client that rejects unknown ones breaks on a harmless server upgrade. Requests are
dumped with `by_alias=True, exclude_none=True`, exactly like the SDK's `safe_json`, so
the body we send (and show in `--dry-run`) is the body the real SDK would send.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Wire(BaseModel):
    # Each built on first use: a plan needs the job's few models, a poll a few others,
    # and building all twenty cost every Lepton command ~20-40 ms.
    model_config = ConfigDict(extra="allow", populate_by_name=True, defer_build=True)

    def body(self) -> dict[str, Any]:
        """The JSON the SDK would send for this object."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class Metadata(Wire):
    id: str | None = None
    name: str | None = None
    created_at: int | None = None  # milliseconds
    labels: dict[str, str] | None = None
    owner: str | None = None
    created_by: str | None = None


class SecretRef(Wire):
    secret_name_ref: str


class EnvVar(Wire):
    name: str
    value: str | None = None
    value_from: SecretRef | None = None


class Mount(Wire):
    path: str | None = None
    from_: str | None = Field(default=None, alias="from")
    mount_path: str
    mount_options: dict[str, Any] | None = None


class Container(Wire):
    image: str | None = None
    command: list[str] | None = None


class Affinity(Wire):
    allowed_dedicated_node_groups: list[str] | None = None
    allowed_nodes_in_node_group: list[str] | None = None


class QueueConfig(Wire):
    priority_class: str | None = None
    can_be_preempted: bool | None = None
    can_preempt: bool | None = None


class JobUserSpec(Wire):
    resource_shape: str | None = None
    affinity: Affinity | None = None
    container: Container = Field(default_factory=Container)
    shared_memory_size: int | None = None
    completions: int | None = 1
    parallelism: int | None = 1
    max_failure_retry: int | None = None
    max_job_failure_retry: int | None = None
    envs: list[EnvVar] = Field(default_factory=list)
    mounts: list[Mount] = Field(default_factory=list)
    image_pull_secrets: list[str] = Field(default_factory=list)
    ttl_seconds_after_finished: int | None = 600
    intra_job_communication: bool | None = None
    queue_config: QueueConfig | None = None
    stopped: bool | None = None


class JobStatusDetails(Wire):
    job_name: str | None = None
    state: str = ""
    ready: int = 0
    active: int = 0
    failed: int = 0
    succeeded: int = 0
    creation_time: int | None = None
    completion_time: int | None = None


class JobStatus(JobStatusDetails):
    job_history: list[JobStatusDetails] = Field(default_factory=list)


class LeptonJob(Wire):
    metadata: Metadata
    spec: JobUserSpec = Field(default_factory=JobUserSpec)
    status: JobStatus | None = None

    @property
    def state(self) -> str:
        return self.status.state if self.status else ""


class ReplicaNode(Wire):
    name: str | None = None
    id: str | None = None


class ReplicaStatus(Wire):
    public_ip: str | None = None
    node: ReplicaNode | None = None


class Replica(Wire):
    metadata: Metadata
    id: str  # required: the SDK drops replicas without it
    status: ReplicaStatus | None = None


class Event(Wire):
    type: str
    reason: str
    regarding: dict[str, Any] | None = None
    count: int
    last_observed_time: str
    message: str | None = None


class Volume(Wire):
    from_: str = Field(alias="from")
    name: str | None = None
    size_in_gb: int
    from_path: str | None = None
    default_mount_path: str | None = None


class NodeGroupSpec(Wire):
    volumes: list[Volume] = Field(default_factory=list)
    gpu_product: str | None = None


class NodeGroup(Wire):
    metadata: Metadata
    spec: NodeGroupSpec
    status: dict[str, Any] | None = None


class Node(Wire):
    metadata: Metadata
    spec: dict[str, Any]
    status: dict[str, Any] | None = None


class ShapeSpec(Wire):
    name: str | None = None
    description: str | None = None
    cpu: float | None = None
    memory_in_mb: int | None = None
    accelerator_type: str | None = None
    accelerator_num: int | None = None
    node_group_id: str | None = None


class Shape(Wire):
    metadata: Metadata
    spec: ShapeSpec

    @property
    def shape_id(self) -> str:
        """What `resource_shape` takes: the metadata id. The spec name is a display name
        and may differ from it."""
        return self.metadata.id or self.metadata.name or self.spec.name or ""


class StoragePermission(Wire):
    path_prefix: str
    allowed_users: list[str] = Field(default_factory=list)
    subfolder_policy: str = ""
    nodegroup_id: str | None = None


def replica_index(replica_id: str, job_id: str) -> int | None:
    """Worker index from a replica id `<job_id>-<index>-<5 chars>` (NeMo-Run reads it so)."""
    rest = replica_id.removeprefix(job_id + "-").split("-", 1)[0]
    return int(rest) if replica_id.startswith(job_id + "-") and rest.isdigit() else None
