"""Helpers shared by the Lepton tests (a plain module: tests/ is not a package)."""

from __future__ import annotations

import shutil
from pathlib import Path

from helpers import wait_until  # noqa: F401 - re-exported for the Lepton tests

PROGRAMS = Path(__file__).resolve().parent / "programs"
ROOT = Path(__file__).resolve().parents[2]

# Jobs on the node group (`dedicated_node_group: h100-pool`) see the Lustre volume's first
# permitted folder at /mnt/lustre, and nothing of this machine: programs a job runs and
# checkpoints it writes live there, as on Lepton.
NODE_GROUP = "h100-pool"
MOUNT = "/mnt/lustre"
PERMITTED = "fsw/portfolios/edgeai"


def volume_dir(emulator, container_path: str = MOUNT) -> Path:
    """The emulator's directory behind `container_path` (a path under /mnt/lustre)."""
    rel = Path(container_path).relative_to(MOUNT)
    return emulator.world.volumes / "lustre" / PERMITTED / rel


def on_volume(emulator, *files: Path) -> str:
    """Copy programs onto the Lustre volume; returns the folder jobs see them in."""
    folder = volume_dir(emulator, f"{MOUNT}/programs")
    folder.mkdir(parents=True, exist_ok=True)
    for file in files:
        shutil.copy(file, folder / file.name)
    return f"{MOUNT}/programs"
