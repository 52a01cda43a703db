"""Hand every rendered task to the real SkyPilot library before it is shown or submitted.

SkyPilot is an optional extra and takes seconds to import, so it is imported here and
only here, when the skypilot backend is used. Its verdict (schema, resources, storage)
becomes a one-line ConfigError naming the job file's line for the key concerned.
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from types import ModuleType
from typing import Any

from anylaunch.errors import ConfigError, UsageError

INSTALL = "pip install 'anylaunch[skypilot]'"
# Task keys that come from a field of the `skypilot:` section, to point at its line.
_SECTION_KEYS = {
    "file_mounts": "file_mounts",
    "any_of": "any_of",
    "image_id": "image_id",
    "accelerators": "accelerators",
    "infra": "cloud",
    "instance_type": "instance_type",
    "cpus": "cpus",
    "memory": "memory",
    "setup": "setup",
    "workdir": "workdir",
    "envs": "env_vars",
    "job_recovery": "recovery_strategy",
    "autostop": "idle_minutes_to_autostop",
}


def sky() -> ModuleType:
    """The SkyPilot package, or a usage error (exit 2) that says how to install it."""
    # SkyPilot phones home on import and on every call unless told not to (reference:
    # skypilot-slurm.md, gotcha 13); a launcher must not leak usage data by default.
    os.environ.setdefault("SKYPILOT_DISABLE_USAGE_COLLECTION", "1")
    try:
        import sky as module
    except ImportError as exc:
        raise UsageError(
            f"the skypilot backend needs the SkyPilot library ({exc.name} is not installed)"
            f" — {INSTALL}",
            code="SKYPILOT_MISSING",
        ) from None
    return module


def validate(task: dict[str, Any], *, source: str | None) -> Any:
    """Build a `sky.Task` from the rendered dict, as `sky launch task.yaml` would."""
    module = sky()
    try:
        return module.Task.from_yaml_config(copy.deepcopy(task))
    except Exception as exc:  # SkyPilot raises ValueError, its own errors, jsonschema's
        raise rejected(task, exc, source) from None


def rejected(task: dict[str, Any], exc: BaseException, source: str | None) -> ConfigError:
    message = " ".join(str(exc).split()) or type(exc).__name__
    field = _field_of(task, message)
    key = f"skypilot.{field}" if field else "skypilot"
    return ConfigError(
        f"SkyPilot rejects the task: {message}",
        file=source,
        line=line_of(source, ("skypilot", field) if field else ("skypilot",)),
        key=key,
        fix="fix that key (the rendered task: anylaunch run FILE --dry-run)",
    )


def _field_of(task: dict[str, Any], message: str) -> str | None:
    """The section field behind SkyPilot's complaint: a key it names, else the task part
    that holds the value it quotes first (`'SOMETIMES' is not one of [...]`)."""
    named = next((f for k, f in _SECTION_KEYS.items() if k in message), None)
    if named:
        return named
    quoted = re.findall(r"'([^']+)'", message)
    if not quoted:
        return None
    parts = {**task, **(task.get("resources") or {})}
    for key, value in parts.items():
        if key in _SECTION_KEYS and quoted[0] in json.dumps(value):
            return _SECTION_KEYS[key]
    return None


def line_of(source: str | None, path: tuple[str, ...]) -> int | None:
    """The job file's line for `path` (or its nearest ancestor); errors only, so re-read."""
    if not source:
        return None
    from anylaunch.yamlsrc import parse

    try:
        located = parse(Path(source).read_text(encoding="utf-8"), source)
    except (OSError, ConfigError):
        return None
    return located.origin(path).line
