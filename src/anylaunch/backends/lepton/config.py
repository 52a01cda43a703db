"""The `lepton:` section (the seed's create_job parameters, R-L4)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class LeptonSection(BaseModel):
    model_config = ConfigDict(extra="forbid")

    resource_shape: str | None = None
    gpu_count: int | None = Field(default=None, ge=1)
    num_nodes: int | None = Field(default=None, ge=1)
    dedicated_node_group: str | None = None
    env_vars: dict[str, str] = Field(default_factory=dict)
    mounts: list[dict[str, str]] = Field(default_factory=list)
    image_pull_secrets: list[str] = Field(default_factory=list)
    can_be_preempted: bool = False
