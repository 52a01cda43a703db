"""The `lepton:` section: the create_job parameters of TAO's Lepton SDK, in the job file.

Rules that need no API call are checked here, so their errors name the file and line.
Everything that needs the workspace (shape from gpu_count, node group name -> id,
volumes) is resolved later, in the backend's `prepare`.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from anylaunch.backends.lepton.rest.rules import RESERVED_ENV_NAMES
from anylaunch.backends.section import Sized
from anylaunch.jobfile.envvars import EnvName, EnvValue

PriorityClass = Literal[
    "low-1000", "low-2000", "low-3000", "mid-4000", "mid-5000", "mid-6000",
    "high-7000", "high-8000", "high-9000",
]  # fmt: skip
_SECRET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class LeptonMount(BaseModel):
    """A volume of the node group mounted into every replica (Lepton's Mount object).

    `from` is `node-nfs:<volume>` (or `node-local`); `path` is the folder inside the
    volume; `mount_path` is where the job sees it. The CLI's string form
    `PATH:MOUNT_PATH:VOLUME` also works.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    path: str = "/"
    from_: str = Field(alias="from")
    mount_path: str

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        if isinstance(value, str):
            parts = value.split(":")
            if len(parts) != 3 or not all(parts):
                raise ValueError(
                    "write 'PATH:MOUNT_PATH:VOLUME' or a mapping with from and mount_path"
                )
            path, mount_path, volume = parts
            source = volume if volume.startswith("node-") else f"node-nfs:{volume}"
            return {"path": path, "from": source, "mount_path": mount_path}
        return value

    @field_validator("mount_path", "path")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"'{value}' must be an absolute path")
        return value


class LeptonSection(BaseModel, Sized):
    model_config = ConfigDict(extra="forbid")
    # gpu_count is the GPUs of each replica and its ranks, one per GPU.
    size_keys: ClassVar[tuple[str, str]] = ("num_nodes", "gpu_count")
    gpu_key: ClassVar[str | None] = "gpu_count"

    resource_shape: str | None = Field(default=None, description="shape id; else from gpu_count")
    gpu_count: int | None = Field(default=None, ge=1, description="GPUs (ranks) per node")
    num_nodes: int | None = Field(default=None, ge=1)
    dedicated_node_group: str | None = Field(default=None, description="node group name or id")
    env_vars: dict[EnvName, EnvValue] = Field(default_factory=dict)
    mounts: list[LeptonMount] | None = Field(
        default=None, description="explicit; else discovered from the node group's volumes"
    )
    image_pull_secrets: list[str] = Field(default_factory=list)
    priority_class: PriorityClass | None = None
    can_be_preempted: bool | None = None
    can_preempt: bool | None = None
    max_failure_retry: int | None = Field(default=None, ge=0, description="per worker")
    max_job_failure_retry: int | None = Field(default=None, ge=0, description="per whole job")
    eviction_retries: int = Field(
        default=2, ge=0, description="resubmissions after eviction/preemption"
    )
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0)
    shared_memory_size: int | None = Field(default=None, ge=0, description="MiB")
    secrets: dict[EnvName, str] = Field(
        default_factory=dict, description="env name -> an existing workspace secret's name"
    )
    ngc_pull_secret: str = Field(
        default="anylaunch-ngc", description="image pull secret made from NGC_KEY for nvcr.io"
    )

    @field_validator("env_vars", mode="before")
    @classmethod
    def _env_as_text(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: str(v) if isinstance(v, int | float | bool) else v for k, v in value.items()}
        return value

    @field_validator("secrets")
    @classmethod
    def _secret_names(cls, value: dict[str, str]) -> dict[str, str]:
        for env, name in value.items():
            if not _SECRET_NAME.match(name):
                raise ValueError(f"secret name '{name}' for {env} has characters Lepton rejects")
        return value

    @field_validator("env_vars", "secrets")
    @classmethod
    def _not_reserved(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if name in RESERVED_ENV_NAMES:
                raise ValueError(
                    f"{name} is reserved by Lepton (the platform sets it in every replica);"
                    " use another name"
                )
        return value

    @model_validator(mode="after")
    def _queue_needs_node_group(self) -> LeptonSection:
        # The official CLI refuses queue flags without --node-group: queues, priorities
        # and preemption only exist on a dedicated node group.
        for key in ("priority_class", "can_be_preempted", "can_preempt"):
            if getattr(self, key) is not None and not self.dedicated_node_group:
                raise ValueError(
                    f"{key} needs dedicated_node_group (Lepton queues only exist on node"
                    " groups); set lepton.dedicated_node_group or remove it"
                )
        return self


def located_error(spec: Any, path: tuple[str, ...], what: str, fix: str) -> Any:
    """A ConfigError naming the file and line where `path` was written in the job file.

    For rules checked after loading (the file is read again only to find the line)."""
    from pathlib import Path

    from anylaunch.errors import AnylaunchError, ConfigError
    from anylaunch.jobfile.yamlsrc import format_path, parse

    source = getattr(spec, "source", None) or "<job>"
    try:
        located = parse(Path(source).read_text(encoding="utf-8"), source)
    except (OSError, UnicodeDecodeError, AnylaunchError):
        return ConfigError(what, file=source, key=format_path(path), fix=fix)
    return located.error(path, what, fix)
