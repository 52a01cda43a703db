"""The local backend's checks: what this machine must have for the job to start here."""

from __future__ import annotations

import importlib.util
import shutil
import socket
import sys
from pathlib import Path

from anylaunch.backends.checks import Check, Checks
from anylaunch.jobfile.spec import JobSpec, Profile


def checks(spec: JobSpec) -> list[Check]:
    out = Checks()
    section = spec.local
    if section and section.master_port:
        with socket.socket() as sock:
            try:
                sock.bind((section.master_addr, section.master_port))
                out.ok("master_port", f"port {section.master_port} is free")
            except OSError:
                out.fail(
                    "master_port",
                    f"port {section.master_port} is in use on this machine",
                    "remove local.master_port (a free port is picked) or choose another",
                )
    if section and section.workdir and spec.source:
        workdir = Path(spec.source).resolve().parent / section.workdir
        if not workdir.is_dir():
            out.fail("workdir", f"{workdir} does not exist", "create it or fix local.workdir")
    python = section.python if section and section.python else sys.executable
    if (
        spec.launcher == "torchrun"
        and python == sys.executable
        and importlib.util.find_spec("torch") is None
    ):
        out.fail(
            "torch",
            f"torch is not installed for {python} (torchrun needs it)",
            "pip install torch (CPU: pip install torch==2.13.0 here), or use launcher: none",
        )
    # The nodes run here, so the profiler must be here too.
    if (spec.profile or Profile()).enabled(spec) and shutil.which("nsys") is None:
        out.fail("nsys", "nsys is not on PATH", "install Nsight Systems, or turn profiling off")
    return out
