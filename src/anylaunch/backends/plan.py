"""Plan: the exact thing a backend would submit, rendered without side effects.

`--dry-run` prints it; submit sends it; the store keeps it. A plan never holds a secret:
every secret the job gets, from `env` or from the backend's own section, is named in
`secret_env`, and the submission pipeline hands `submit` their values, and only theirs
(`Backend.secret_values`, `submission.secrets_for`). There is no other channel.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    pass


# A backend's payload: its own TypedDict (`SlurmPayload`, `LeptonPayload`, ...), so the
# keys a backend reads back are the keys it wrote. A plan read back from the store, or
# handled by code common to all backends, is a `Plan` of any payload.
PayloadT = TypeVar("PayloadT", bound=Mapping[str, Any])


class Plan(BaseModel, Generic[PayloadT]):
    backend: str
    job_id: str
    name: str
    job_dir: str
    # Nodes the job runs on: node logs are numbered 0..nodes-1 (`logs --node`).
    nodes: int = Field(ge=1)
    # What the backend submits, in its own shape: node processes, sbatch text, API JSON.
    payload: PayloadT
    # Files written into the job directory before submission (relative path -> text).
    files: dict[str, str] = Field(default_factory=dict)
    # Every environment variable passed to the job whose value is a secret, by name only.
    secret_env: list[str] = Field(default_factory=list)
    # What the backend inferred instead of reading it from the platform: shown with the
    # plan (dry run, --json), so a guess is never taken for a fact.
    guesses: list[str] = Field(default_factory=list)
    # The folder on this machine the job's code comes from (its working folder), whose
    # git commit the job records; None when the job runs only what its image holds.
    code_dir: str | None = None
    # The job runs from a copy of `code_dir` made at submit time in `<job_dir>/snapshot`
    # (the submission pipeline makes it, before `submit`), not from the folder itself.
    snapshot: bool = False

    def to_json(self) -> dict[str, Any]:
        """The plan as `--json` shows it: named by the job it renders, like every object."""
        return {"id": self.job_id, "kind": "plan", **self.model_dump(mode="json")}
