"""The job API's rules as the emulated server applies them.

The emulator keeps its own copy rather than importing the client's: a client that loses
a rule must be caught by the server refusing the request, not agree with it by sharing
the mistake. Taken from the official SDK, leptonai/leptonai:

- `leptonai/config.py`, `LEPTON_RESERVED_ENV_NAMES`. The 0.47.1 release on PyPI lists
  LEPTON_JOB_NAME too; the repository's main branch no longer does. The server keeps
  the longer list, so a rehearsal refuses what either refuses.
- `leptonai/api/v2/job_validation.py` of the 0.47.1 release (absent from the main
  branch): the job name and label key patterns, `LEPTON_RESERVED_MOUNT_PATHS` and
  `_normalize_mount_path` (POSIX normalisation, `//` collapsed), and positive
  completions/parallelism.
- `leptonai/api/v2/spec_utils.py` (0.47.1), `validate_environment_variable_name`: env
  names of letters, digits, '.', '_', '-', not starting with a digit.
- `leptonai/cli/util.py`, `_validate_queue_priority`: the nine priority classes.

Stricter than the SDK, on purpose: no `..` in a mount's `path` or `mount_path`. The SDK
normalises `mount_path` before its reserved-path check and checks nothing in `path`
(`Mount` in `leptonai/api/v2/types/deployment.py` is two plain strings); the platform
binds `path` from a node's volume, where a `..` would climb out of the folder the
storage permissions allow, or out of the volume. Kubernetes, which runs Lepton's jobs,
refuses `..` in a hostPath or a subPath for that reason. Whether Lepton's server refuses
it at create, or the node at mount time, is not published: the emulator refuses it at
create, with the other validation errors.
"""

from __future__ import annotations

import posixpath
import re

JOB_NAME = re.compile(r"^[a-z][a-z0-9-]*$")
MAX_JOB_NAME_LENGTH = 36
LABEL_KEY = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")
MAX_LABEL_KEY_LENGTH = 63

RESERVED_ENV_NAMES = frozenset(
    {
        "LEPTON_WORKSPACE_ID",
        "LEPTON_DEPLOYMENT_NAME",
        "LEPTON_JOB_NAME",
        "LEPTON_RESOURCE_ACCELERATOR_TYPE",
        "LEPTON_WORKSPACE_ORIGIN_URL",
    }
)
ENV_NAME = re.compile(r"^[A-Za-z0-9._-]+$")

RESERVED_MOUNT_PATHS = frozenset(
    {
        "/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/media", "/opt", "/proc",
        "/run", "/sbin", "/srv", "/sys", "/usr", "/usr/bin", "/usr/lib", "/usr/local",
        "/usr/sbin", "/var", "/sys/fs/cgroup", "/sys/kernel/security", "/proc/sys",
        "/proc/bus",
    }
)  # fmt: skip

PRIORITY_CLASSES = (
    "low-1000", "low-2000", "low-3000", "mid-4000", "mid-5000", "mid-6000",
    "high-7000", "high-8000", "high-9000",
)  # fmt: skip


def job_name_problem(name: str) -> str | None:
    if (
        len(name) > MAX_JOB_NAME_LENGTH
        or not JOB_NAME.match(name)
        or name.endswith("-")
        or name.endswith("by-lepton")
    ):
        return (
            f"invalid job name '{name}': lowercase letters, digits and '-', starting with a "
            f"letter, at most {MAX_JOB_NAME_LENGTH} characters, not ending with '-'"
        )
    return None


def label_key_problem(key: str) -> str | None:
    if len(key) > MAX_LABEL_KEY_LENGTH or not LABEL_KEY.match(key):
        return f"invalid label key {key!r}"
    return None


def env_name_problem(name: object) -> str | None:
    """Why `name` cannot be a job env name, or None."""
    if not isinstance(name, str) or not name:
        return "env name cannot be empty"
    if name[0].isdigit():
        return f"env name {name!r} starts with a digit"
    if not ENV_NAME.match(name):
        return f"env name {name!r} has characters other than letters, digits, '.', '_', '-'"
    if name in RESERVED_ENV_NAMES:
        return f"env {name} is reserved by Lepton (the platform sets it in every replica)"
    return None


def climbs(path: str) -> bool:
    """Whether a path has a `..` part (`a/../b`, `/..`, `..`)."""
    return ".." in path.split("/")


def is_reserved_mount_path(path: str) -> bool:
    normalized = posixpath.normpath(path)
    if normalized.startswith("//"):
        normalized = "/" + normalized.lstrip("/")
    return normalized in RESERVED_MOUNT_PATHS
