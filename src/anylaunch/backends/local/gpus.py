"""The GPUs this machine shows a job: what the local backend shares out among its
simulated nodes and what its preflight checks a request against."""

from __future__ import annotations

import os
import shutil
import subprocess


def visible_gpus() -> list[str]:
    """The GPUs this machine shows a job, as CUDA_VISIBLE_DEVICES names them, without
    importing torch (seconds of start-up)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        # CUDA enumerates up to the first entry that names no device ("-1", "").
        out = []
        for device in visible.split(","):
            if not device.strip() or device.strip() == "-1":
                break
            out.append(device.strip())
        return out
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        listed = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    count = sum(1 for line in listed.splitlines() if line.startswith("GPU "))
    return [str(i) for i in range(count)]
