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
    # SkyPilot phones home on import and on every call unless told not to; a launcher
    # must not leak usage data by default.
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
    from anylaunch.jobfile.yamlsrc import line_of

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


class Accepted:
    """A task the library accepted, and a cheap check for tasks that differ from it only
    the way the splits of one run differ.

    Splits of a run render the same task but for their job id (in the run script and a
    checkpoint bucket's name) and their SPLIT_ID / SPLIT_VALUE environment values. The
    library takes ~10 ms per task, so a 1,000-split run validated each one for ~10 s. A
    task is covered, and not handed to the library again, when it equals the accepted one
    after its job id is swapped for the accepted task's job id, except for `run` and the
    values of `envs`, and those pass the library's own schema for them. Job ids are all
    8 characters of one alphabet, so the swap keeps every length and character rule the
    library applies (bucket and cluster names). Anything else that differs, an `envs`
    value the library would also write into file mounts or the workdir (`$NAME`), or a
    validator a SkyPilot plugin registered, sends the task to the full validation.
    """

    def __init__(self, task: dict[str, Any], job_id: str) -> None:
        sky()  # the install hint, and no usage collection, before importing its parts
        from sky import task as sky_task_module
        from sky.utils import schemas
        from sky.utils.validator import get_schema_validator

        self._task = copy.deepcopy(task)
        self._job_id = job_id
        properties = schemas.get_task_schema()["properties"]
        part = {"type": "object", "properties": {k: properties[k] for k in ("envs", "run")}}
        self._schema = get_schema_validator()(part)
        # Validators registered by plugins may look at any field: then no shortcut.
        self._plugins = bool(getattr(sky_task_module, "_task_validators", ()))

    def covers(self, task: dict[str, Any], job_id: str) -> bool:
        if self._plugins:
            return False
        ours = _swap(task, job_id, self._job_id) if job_id != self._job_id else task
        differing: list[tuple[Any, ...]] = []
        if not _same_shape(self._task, ours, (), differing):
            return False
        for path in differing:
            if path == ("run",):
                continue
            if len(path) == 2 and path[0] == "envs" and not _substituted(ours, str(path[1])):
                continue
            return False
        part = {k: ours[k] for k in ("envs", "run") if k in ours}
        return bool(self._schema.is_valid(part))


def _swap(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, dict):
        return {_swap(k, old, new): _swap(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_swap(v, old, new) for v in value]
    return value


def _same_shape(a: Any, b: Any, path: tuple[Any, ...], differing: list[tuple[Any, ...]]) -> bool:
    """Whether `b` has `a`'s keys, lengths and types; where strings differ is collected."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return False
        return all(_same_shape(a[k], b[k], (*path, k), differing) for k in a)
    if isinstance(a, list):
        if len(a) != len(b):
            return False
        return all(_same_shape(a[i], b[i], (*path, i), differing) for i in range(len(a)))
    if a != b:
        if not isinstance(a, str):
            return False
        differing.append(path)
    return True


def _substituted(task: dict[str, Any], name: str) -> bool:
    """Whether the library writes env `name`'s value into a part it then checks."""
    parts = [task.get(k) for k in ("file_mounts", "workdir", "service", "volumes")]
    text = json.dumps(parts)
    return f"${name}" in text or f"${{{name}}}" in text
