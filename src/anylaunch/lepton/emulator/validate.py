"""What a create request must satisfy (the SDK's job_validation rules, checked server-side).

Each problem is a 400 with `{"code": "ValidationError", "message": ...}`.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from typing import Any

from anylaunch.lepton.emulator import catalog

_NAME = re.compile(r"^[a-z][a-z0-9-]*$")
_ENV = re.compile(r"^[A-Za-z._-][A-Za-z0-9._-]*$")
RESERVED_ENV = frozenset(
    [
        "LEPTON_WORKSPACE_ID",
        "LEPTON_DEPLOYMENT_NAME",
        "LEPTON_JOB_NAME",
        "LEPTON_RESOURCE_ACCELERATOR_TYPE",
        "LEPTON_WORKSPACE_ORIGIN_URL",
    ]
)
RESERVED_MOUNTS = frozenset(
    [
        "/",
        "/bin",
        "/boot",
        "/dev",
        "/etc",
        "/lib",
        "/lib64",
        "/media",
        "/opt",
        "/proc",
        "/run",
        "/sbin",
        "/srv",
        "/sys",
        "/usr",
        "/usr/bin",
        "/usr/lib",
        "/usr/local",
        "/usr/sbin",
        "/var",
        "/sys/fs/cgroup",
        "/sys/kernel/security",
        "/proc/sys",
        "/proc/bus",
    ]
)


class Invalid(Exception):
    pass


def check_job(body: Any, secret_exists: Callable[[str], bool]) -> None:
    if not isinstance(body, dict) or not isinstance(body.get("metadata"), dict):
        raise Invalid("body must be a LeptonJob object with 'metadata'")
    name = body["metadata"].get("id") or body["metadata"].get("name")
    if not isinstance(name, str) or not name:
        raise Invalid("metadata.id (the job name) is required")
    if len(name) > 36 or not _NAME.match(name) or name.endswith("-") or name.endswith("by-lepton"):
        raise Invalid(
            f"invalid job name '{name}': lowercase letters, digits and '-', starting with a "
            "letter, at most 36 characters, not ending with '-'"
        )
    spec = body.get("spec") or {}
    if not isinstance(spec, dict):
        raise Invalid("spec must be an object")
    for key in ("completions", "parallelism"):
        value = spec.get(key, 1)
        if value is not None and (not isinstance(value, int) or value < 1):
            raise Invalid(f"spec.{key} must be a positive integer")
    shape = spec.get("resource_shape")
    if shape is not None and catalog.shape(shape) is None:
        raise Invalid(f"unknown resource_shape '{shape}'")
    groups = ((spec.get("affinity") or {}).get("allowed_dedicated_node_groups")) or []
    known = {g["metadata"]["id"] for g in catalog.node_groups("")}
    for group in groups:
        if group not in known:
            raise Invalid(f"unknown dedicated node group '{group}' (give its id)")
    for env in spec.get("envs") or []:
        _check_env(env, secret_exists)
    for mount in spec.get("mounts") or []:
        _check_mount(mount)


def _check_env(env: Any, secret_exists: Callable[[str], bool]) -> None:
    name = env.get("name") if isinstance(env, dict) else None
    if not isinstance(name, str) or not _ENV.match(name):
        raise Invalid(f"invalid env name {name!r}")
    if name in RESERVED_ENV:
        raise Invalid(f"env {name} is reserved by the platform")
    ref = (env.get("value_from") or {}).get("secret_name_ref")
    if ref is not None and not secret_exists(ref):
        raise Invalid(f"env {name}: secret '{ref}' not found in the workspace")


def _check_mount(mount: Any) -> None:
    if not isinstance(mount, dict) or not isinstance(mount.get("mount_path"), str):
        raise Invalid("each mount needs mount_path")
    if posixpath.normpath(mount["mount_path"]) in RESERVED_MOUNTS:
        raise Invalid(f"mount_path {mount['mount_path']} is a reserved system path")
    source = mount.get("from")
    if source is None or source == "node-local":
        return
    kind, _, volume = str(source).partition(":")
    if (
        kind not in ("node-nfs", "node-local", "node-remote")
        or volume not in catalog.volume_names()
    ):
        raise Invalid(f"mount from '{source}': no such volume in the workspace's node groups")
