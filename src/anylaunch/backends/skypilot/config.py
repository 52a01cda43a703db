"""The `skypilot:` section: AutoModel's SkyPilotConfig fields and what spot needs.

Every key is checked here, without importing SkyPilot, so a typo (`use_sopt`) is a
one-line error naming its line with SkyPilot's own kind of "did you mean". Fields that
SkyPilot defines richly (file_mounts) are typed loosely here and checked by the real
library when the task is rendered.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from anylaunch.backends.section import Sized
from anylaunch.jobfile.envvars import AutoModelEnv

# AutoModel's five, plus Slurm: SkyPilot drives a Slurm cluster over SSH (the e2e test).
Cloud = Literal["aws", "gcp", "azure", "lambda", "kubernetes", "slurm"]
Recovery = Literal["EAGER_NEXT_REGION", "FAILOVER"]
MountMode = Literal["MOUNT", "MOUNT_CACHED", "COPY"]
_ACCELERATORS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*(:\d+(\.\d+)?)?$")
# Object stores SkyPilot can mount as a bucket (sky.data.StoreType sources).
BUCKET_SCHEMES = ("s3", "gs", "r2", "cos", "oci", "nebius", "https")
# AutoModel's port for the SkyPilot launcher's torchrun (its launcher.py).
DEFAULT_MASTER_PORT = 12375


def _accelerators(value: str) -> str:
    if not _ACCELERATORS.match(value):
        raise ValueError(f"'{value}' is not NAME or NAME:COUNT; write it like \"H100:8\"")
    return value


Accelerators = Annotated[str, AfterValidator(_accelerators)]


class Resources(BaseModel):
    """What a node needs, in SkyPilot's resources terms: the section's own, and each
    `any_of` entry SkyPilot may pick instead."""

    model_config = ConfigDict(extra="forbid")

    cloud: Cloud | None = None
    region: str | None = None
    zone: str | None = None
    accelerators: Accelerators | None = Field(
        default=None, description='"H100:8": GPU type and count'
    )
    instance_type: str | None = None
    cpus: int | float | str | None = Field(default=None, description='4, or "4+" for at least 4')
    memory: int | float | str | None = Field(default=None, description='GB: 32, or "32+"')
    disk_size: int | None = Field(default=None, ge=1, description="GB per node")
    image_id: str | None = Field(default=None, description='"docker:<image>" for a container')


class Candidate(Resources):
    """One entry of `any_of`: resources SkyPilot may pick instead of the section's own."""

    use_spot: bool | None = None


class SkyPilotSection(AutoModelEnv, Resources, Sized):
    """AutoModel's SkyPilotConfig fields, the resources (from `Resources`), the files and
    the lifecycle."""

    model_config = ConfigDict(extra="forbid")
    # AutoModel's gpus_per_node is the ranks per node (torchrun's --nproc-per-node);
    # the GPUs are the count in accelerators.
    size_keys: ClassVar[tuple[str, str]] = ("num_nodes", "gpus_per_node")
    gpu_key: ClassVar[str | None] = "accelerators"

    # -- AutoModel's SkyPilotConfig fields ----------------------------------------------------
    num_nodes: int | None = Field(default=None, ge=1)
    use_spot: bool = False
    setup: str | None = None
    # env_vars, and AutoModel's hf_token and wandb_key: AutoModelEnv's.
    # AutoModel's SkyPilotConfig and launcher also take these; a recipe file written for
    # it works as is.
    job_name: str | None = Field(default=None, description="task name (and cluster name)")
    hf_home: str | None = Field(default=None, description="HF_HOME on the nodes")
    gpus_per_node: int | None = Field(
        default=None, ge=1, description="ranks per node (default: the count in accelerators)"
    )
    job_dir: str | None = Field(
        default=None,
        description="AutoModel's local folder for the job's files; anylaunch keeps them in"
        " its store",
    )

    # -- resources: Resources' fields, and --------------------------------------------------
    image_id: str | None = Field(
        default=None, description='"docker:<image>" for a container; default from image:'
    )
    any_of: list[Candidate] = Field(
        default_factory=list, description="candidate resources; SkyPilot picks the cheapest"
    )

    # -- files -------------------------------------------------------------------------------
    workdir: str | None = Field(default=None, description="local folder synced to every node")
    file_mounts: dict[str, Any] = Field(
        default_factory=dict, description="remote path -> local path, bucket URI or mapping"
    )
    checkpoint_bucket: str | None = Field(
        default=None, description="s3://bucket/prefix mounted at the checkpoint directory"
    )
    checkpoint_mount_mode: MountMode = "MOUNT"

    # -- lifecycle ---------------------------------------------------------------------------
    cluster_name: str | None = Field(default=None, description="reuse or name the cluster")
    idle_minutes_to_autostop: int | None = Field(default=None, ge=0)
    down: bool | None = Field(
        default=None,
        description="tear the cluster down (not stop) when idle; default: on for"
        " clusters anylaunch names itself",
    )
    managed: bool | None = Field(
        default=None,
        description="SkyPilot managed job (recovers from preemption); default use_spot",
    )
    recovery_strategy: Recovery = "EAGER_NEXT_REGION"
    max_restarts_on_errors: int = Field(default=0, ge=0, description="managed: user-code failures")
    max_lost_minutes: float = Field(
        default=30, gt=0, description="spot: most work a preemption may lose (preflight)"
    )
    master_port: int = Field(default=DEFAULT_MASTER_PORT, ge=1, le=65535)

    @field_validator("file_mounts")
    @classmethod
    def _absolute_destinations(cls, value: dict[str, Any]) -> dict[str, Any]:
        for dest in value:
            if not (dest.startswith("/") or dest.startswith("~")):
                raise ValueError(f"'{dest}' must be an absolute path on the node (or start with ~)")
        return value

    @field_validator("checkpoint_bucket")
    @classmethod
    def _bucket_uri(cls, value: str | None) -> str | None:
        if value is None:
            return value
        scheme, sep, rest = value.partition("://")
        if not sep or scheme not in BUCKET_SCHEMES or not rest.strip("/"):
            raise ValueError(
                f"'{value}' is not a bucket URI; write s3://bucket/prefix"
                f" (schemes: {', '.join(BUCKET_SCHEMES)})"
            )
        return value

    @model_validator(mode="after")
    def _place_needs_cloud(self) -> SkyPilotSection:
        if (self.region or self.zone) and not self.cloud:
            raise ValueError(
                "region and zone need a cloud; add cloud: (aws, gcp, azure, lambda, kubernetes, slurm)"
            )
        return self

    @property
    def is_managed(self) -> bool:
        """Managed jobs are what recovers a preempted spot job; plain launches do not."""
        return self.use_spot if self.managed is None else self.managed

    def gpus(self) -> int | None:
        """The count in accelerators ("H100:8"); None for a type alone ("H100")."""
        return accelerator_count(self.accelerators)

    def asks_for_gpus(self) -> bool:
        return bool(self.accelerators) or any(c.accelerators for c in self.any_of)

    def gpus_key(self) -> str:
        return "any_of" if self.accelerators is None and self.any_of else "accelerators"


def accelerator_count(accelerators: str | None) -> int | None:
    """8 for "H100:8"; None where no count is written."""
    _, _, count = (accelerators or "").partition(":")
    return max(1, int(float(count))) if count else None
