"""The `slurm:` section (AutoModel's SlurmConfig fields, R-A2)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

_TIME = re.compile(r"^(\d+-)?\d{1,2}:\d{2}:\d{2}$")


class VolumeMapping(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str
    dest: str

    @classmethod
    def coerce(cls, value: Any) -> Any:
        if isinstance(value, str):
            src, sep, dst = value.partition(":")
            if not src or (sep and not dst):
                raise ValueError("write 'source:dest' or a mapping with source and dest")
            return {"source": src, "dest": dst or src}
        return value


class SlurmSection(BaseModel):
    model_config = ConfigDict(extra="forbid")

    job_name: str | None = None
    nodes: int | None = Field(default=None, ge=1)
    ntasks_per_node: int | None = Field(default=None, ge=1)
    time: str | None = Field(default=None, description="HH:MM:SS or D-HH:MM:SS")
    account: str | None = None
    partition: str | None = None
    container_image: str | None = None
    nemo_mount: VolumeMapping | None = None
    hf_home: str | None = None
    extra_mounts: list[VolumeMapping] = Field(default_factory=list)
    master_port: int = Field(default=13742, ge=1, le=65535)
    env_vars: dict[str, str] = Field(default_factory=dict)
    nsys_enabled: bool = False

    @field_validator("time")
    @classmethod
    def _time_format(cls, value: str | None) -> str | None:
        if value is not None and not _TIME.match(value):
            raise ValueError(f"'{value}' is not HH:MM:SS or D-HH:MM:SS")
        return value

    @field_validator("nemo_mount", mode="before")
    @classmethod
    def _one_mount(cls, value: Any) -> Any:
        return VolumeMapping.coerce(value)

    @field_validator("extra_mounts", mode="before")
    @classmethod
    def _mounts(cls, value: Any) -> Any:
        return [VolumeMapping.coerce(v) for v in value] if isinstance(value, list) else value
