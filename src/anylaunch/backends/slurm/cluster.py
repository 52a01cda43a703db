"""Which Slurm cluster a job goes to: one reached over ssh through its login node
(`slurm.login`, else ANYLAUNCH_SLURM_LOGIN), or the one this machine's Slurm tools reach."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from anylaunch.backends.slurm.login import ENV, Login
from anylaunch.errors import ConfigError

if TYPE_CHECKING:
    from anylaunch.jobfile.spec import JobSpec


def login_of(spec: JobSpec) -> Login | None:
    """The login node a job is submitted through; None: the Slurm tools of this machine."""
    text = (spec.slurm.login if spec.slurm else None) or os.environ.get(ENV, "").strip()
    if not text:
        return None
    try:
        return Login.parse(text)
    except ValueError as exc:
        raise ConfigError(str(exc), key=ENV, fix=f"set {ENV}=[user@]host[:port]") from None


def login_in(payload: Mapping[str, Any]) -> Login | None:
    """The login node a plan was submitted through (None: this machine's Slurm tools)."""
    text = payload.get("login")
    return Login.parse(text) if text else None
