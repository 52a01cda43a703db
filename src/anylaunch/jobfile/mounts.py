"""Bind mounts, shared by the neutral `mounts:` key and backend sections (slurm.extra_mounts)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator


class Mount(BaseModel):
    """A bind mount into the job's container or working tree: `source` -> `dest`."""

    model_config = ConfigDict(extra="forbid")

    source: str
    dest: str
    readonly: bool = False

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        # "src:dst[:ro]" and a bare "/path" (same path inside) are the usual shorthands.
        if isinstance(value, str):
            parts = value.split(":")
            if len(parts) == 1 and parts[0]:
                return {"source": parts[0], "dest": parts[0]}
            if len(parts) in (2, 3) and all(parts[:2]):
                if len(parts) == 3 and parts[2] not in ("ro", "rw"):
                    raise ValueError(f"mode '{parts[2]}' must be ro or rw")
                return {"source": parts[0], "dest": parts[1], "readonly": parts[2:] == ["ro"]}
            raise ValueError(f"'{value}' is not a mount; write 'source:dest' or 'source:dest:ro'")
        return value
