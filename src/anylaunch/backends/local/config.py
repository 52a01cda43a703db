"""The `local:` section: torchrun on this machine, optionally as N simulated nodes."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from anylaunch.backends.section import Sized


class LocalSection(BaseModel, Sized):
    """torchrun's own words for sizes (`nnodes`, `nproc_per_node`) plus local knobs."""

    model_config = ConfigDict(extra="forbid")
    size_keys: ClassVar[tuple[str, str]] = ("nnodes", "nproc_per_node")

    nnodes: int | None = Field(default=None, ge=1, description="simulated nodes on this machine")
    nproc_per_node: int | Literal["auto"] | None = Field(
        default=None, description="processes per node; 'auto' = visible GPUs, or 1 on CPU"
    )
    master_addr: str = "127.0.0.1"
    master_port: int | None = Field(default=None, ge=1, le=65535, description="free port if unset")
    workdir: str | None = Field(default=None, description="working directory of every node")
    python: str | None = Field(default=None, description="interpreter for torchrun and workers")
    max_restarts: int = Field(default=0, ge=0, description="torchrun --max-restarts")
    cache_root: str | None = Field(
        default=None, description="cache for S3 inputs; default $ANYLAUNCH_HOME/cache"
    )
    force: bool = Field(
        default=False, description="start more processes than this machine is sized for"
    )
    kill_grace_s: float = Field(
        default=10.0, ge=0, description="seconds between SIGTERM and SIGKILL on cancel/failure"
    )
