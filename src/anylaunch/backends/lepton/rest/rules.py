"""Rules of the Lepton job API that our client applies before it sends a job.

Copied from the official SDK (leptonai 0.47.1): `config.LEPTON_RESERVED_ENV_NAMES`,
`api/v2/job_validation.py` and the CLI's queue flags (`cli/util.py`). The emulator keeps
its own copy (emulator/src/lepton_emulator/rules.py): a rule lost here is then refused by
the emulated server instead of being agreed with.
"""

from __future__ import annotations

import posixpath
import re

# Names the platform sets itself in every replica; a job may not set them.
RESERVED_ENV_NAMES = frozenset(
    {
        "LEPTON_WORKSPACE_ID",
        "LEPTON_DEPLOYMENT_NAME",
        "LEPTON_JOB_NAME",
        "LEPTON_RESOURCE_ACCELERATOR_TYPE",
        "LEPTON_WORKSPACE_ORIGIN_URL",
    }
)
ENV_NAME = re.compile(r"^[A-Za-z0-9._-]+$")  # and not starting with a digit

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
# What `lep job create` puts in queue_config when any queue flag is given without
# --queue-priority.
DEFAULT_PRIORITY_CLASS = "mid-4000"


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


def is_reserved_mount_path(path: str) -> bool:
    normalized = posixpath.normpath(path)
    if normalized.startswith("//"):
        normalized = "/" + normalized.lstrip("/")
    return normalized in RESERVED_MOUNT_PATHS
