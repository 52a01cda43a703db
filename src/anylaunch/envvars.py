"""Environment mappings in job files: YAML reads `OMP_NUM_THREADS: 4` as a number and
`DEBUG: true` as a bool, but the environment only holds text.

Names and values are checked here, once, for every backend: a name the shell cannot
export (`A=B`, `A B`, empty) or a NUL byte (which no environment can hold) is refused
with the key's line, before anything is stored or sent.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

from anylaunch.redact import is_secret_name

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"{name!r} is not an environment variable name;"
            " use letters, digits and '_' only, not starting with a digit"
        )
    return name


def check_value(value: str) -> str:
    if "\x00" in value:
        raise ValueError("holds a NUL byte, which no environment variable can; remove it")
    return value


EnvName = Annotated[str, AfterValidator(check_name)]
EnvValue = Annotated[str, AfterValidator(check_value)]
EnvVars = Annotated[dict[EnvName, EnvValue], BeforeValidator(_as_text)]


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
