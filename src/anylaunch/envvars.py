"""Environment mappings in job files: YAML reads `OMP_NUM_THREADS: 4` as a number and
`DEBUG: true` as a bool, but the environment only holds text."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator

from anylaunch.redact import is_secret_name


def _as_text(value: Any) -> Any:
    if not isinstance(value, dict):
        return value  # let pydantic report the wrong type
    return {k: _text(v) for k, v in value.items()}


def _text(value: Any) -> Any:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | float):
        return str(value)
    return value


EnvVars = Annotated[dict[str, str], BeforeValidator(_as_text)]


def credentials_env(
    env_vars: dict[str, str], hf_token: str | None, wandb_key: str | None
) -> dict[str, str]:
    """The secret part of a section's environment, with AutoModel's two credential fields
    under the names its launcher exports them as (env_vars of the same name win)."""
    out = {k: v for k, v in env_vars.items() if is_secret_name(k)}
    for name, value in (("HF_TOKEN", hf_token), ("WANDB_API_KEY", wandb_key)):
        if value:
            out.setdefault(name, value)
    return out
