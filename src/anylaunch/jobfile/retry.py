"""`retry:` in the job file: how many attempts a job may make, on which failures, and
how long it waits between them.

    retry:
      max_attempts: 3        # every attempt, the first included (default 1: no retry)
      on: [infra, TIME_LIMIT] # diagnosis classes, or the groups infra / any
      backoff: 30s           # before the 2nd attempt; doubled for each later one

What each word of `on:` means, and the decision itself, live with the diagnosis
(`observe/diagnose/policy.py`), which a Slurm job also carries inside itself.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from anylaunch.jobfile.yamlsrc import on_key
from anylaunch.observe.diagnose import policy

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h)?\s*$", re.IGNORECASE)
_UNIT = {None: 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}
MAX_ATTEMPTS = 100


def seconds(value: Any) -> Any:
    """A duration as seconds: a number, or text such as `30s`, `5m`, `1h`."""
    if isinstance(value, bool) or not isinstance(value, str):
        return value
    match = _DURATION.match(value)
    if match is None:
        raise ValueError(f"'{value}' is not a duration such as 30, '30s', '5m' or '1h'")
    return float(match.group(1)) * _UNIT[(match.group(2) or "").lower() or None]


class RetryPolicy(BaseModel):
    """When a failed attempt is followed by another (see the module's doc)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    max_attempts: int = Field(default=1, ge=1, le=MAX_ATTEMPTS)
    on: list[str] | None = Field(
        default=None, description="diagnosis classes or infra/any (default: the retryable ones)"
    )
    backoff: float = Field(default=10.0, ge=0, description="seconds before the second attempt")
    max_backoff: float = Field(default=policy.MAX_BACKOFF_S, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _on_key(cls, data: Any) -> Any:
        return on_key(data)

    @field_validator("backoff", "max_backoff", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        return seconds(value)

    @field_validator("on", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("on")
    @classmethod
    def _known(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        known = policy.names()
        out = []
        for word in value:
            name = word if word in ("infra", "any") else word.upper()
            if name not in known:
                import difflib

                close = difflib.get_close_matches(name, known, n=1)
                hint = f"did you mean {close[0]}? " if close else ""
                raise ValueError(
                    f"'{word}' is not a diagnosis class; {hint}write one of {', '.join(known)}"
                )
            out.append(name)
        if not out:
            raise ValueError("is empty; name the classes to retry, or leave `on` out")
        return out
