"""Environment mappings in job files: YAML reads `OMP_NUM_THREADS: 4` as a number and
`DEBUG: true` as a bool, but the environment only holds text.

Names and values are checked here, once, for every backend: a name the shell cannot
export (`A=B`, `A B`, empty) or a NUL byte (which no environment can hold) is refused
with the key's line, before anything is stored or sent.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field, field_serializer

from anylaunch.jobfile.secrets import MASK, is_secret_name

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


class AutoModelEnv(BaseModel):
    """The environment fields AutoModel's Slurm and SkyPilot configs share: `env_vars` and
    the two credentials its launcher exports as HF_TOKEN and WANDB_API_KEY.

    The store keeps `spec.redacted()`, and AutoModel's own examples write
    `env_vars: {HF_TOKEN: ${HF_TOKEN}}`: serialising a section masks every secret value.
    """

    env_vars: EnvVars = Field(default_factory=dict)
    hf_token: str | None = Field(default=None, description="sent as the secret HF_TOKEN")
    wandb_key: str | None = Field(default=None, description="sent as the secret WANDB_API_KEY")

    @field_serializer("env_vars")
    def _masked(self, value: dict[str, str]) -> dict[str, str]:
        return {k: (MASK if is_secret_name(k) else v) for k, v in value.items()}

    @field_serializer("hf_token", "wandb_key")
    def _masked_credential(self, value: str | None) -> str | None:
        return MASK if value else value

    def public_env(self) -> dict[str, str]:
        return {k: v for k, v in self.env_vars.items() if not is_secret_name(k)}

    def secret_env(self) -> dict[str, str]:
        """The secret part of the environment, with the two credentials under the names
        AutoModel's launcher exports them as (env_vars of the same name win)."""
        out = {k: v for k, v in self.env_vars.items() if is_secret_name(k)}
        for name, value in (("HF_TOKEN", self.hf_token), ("WANDB_API_KEY", self.wandb_key)):
            if value:
                out.setdefault(name, value)
        return out
