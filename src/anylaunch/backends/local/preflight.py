"""The local backend's checks: what this machine must have for the job to start here."""

from __future__ import annotations

import importlib.util
import shutil
import socket
import sys
from pathlib import Path

from anylaunch.backends.checks import Check, Checks
from anylaunch.backends.local.gpus import visible_gpus
from anylaunch.jobfile.spec import JobSpec, Profile


def checks(spec: JobSpec) -> list[Check]:
    out = Checks()
    section = spec.local
    _gpus(spec, out)
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


def _gpus(spec: JobSpec, out: Checks) -> None:
    """Every simulated node gets GPUs of its own, as cluster nodes do: ranks sharing a GPU
    would fail in NCCL, and a program asking CUDA for a GPU that is not there fails late."""
    gpus = spec.per_node("local").gpus
    if not gpus:
        return
    nodes = (spec.local.nnodes if spec.local else None) or spec.nodes or 1
    have = visible_gpus()
    need = nodes * gpus
    shown = f"{len(have)} ({','.join(have)})" if have else "none"
    if len(have) < need:
        on = f" on each of {nodes} nodes" if nodes > 1 else ""
        out.fail(
            "gpus",
            f"gpus_per_node: {gpus}{on} needs {need} GPUs; this machine shows {shown}",
            f"to run the ranks without GPUs, write ranks_per_node: {gpus} instead of"
            f" gpus_per_node (or --set gpus_per_node=null --set ranks_per_node={gpus})",
        )
    else:
        out.ok("gpus", f"{need} of this machine's GPUs ({shown}): {gpus} per node")
