"""Environment mappings in job files: YAML reads `OMP_NUM_THREADS: 4` as a number and
`DEBUG: true` as a bool, but the environment only holds text."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator


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
