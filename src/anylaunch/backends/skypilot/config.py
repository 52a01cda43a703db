"""The `skypilot:` section (AutoModel's SkyPilotConfig fields, R-A4)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class SkyPilotSection(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cloud: Literal["aws", "gcp", "azure", "lambda", "kubernetes"] | None = None
    accelerators: str | None = Field(default=None, description='"H100:8"')
    num_nodes: int | None = Field(default=None, ge=1)
    use_spot: bool = False
    disk_size: int | None = Field(default=None, ge=1, description="GB per node")
    region: str | None = None
    zone: str | None = None
    setup: str | None = None
    env_vars: dict[str, str] = Field(default_factory=dict)
