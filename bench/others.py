"""The tools users would pick instead, in their own venv (bench/.venv-others).

They are never installed into the project's venv: SkyPilot alone pins click and uvicorn
and brings ~450 MB. `python -m bench --setup` makes the venv from the `bench` extra of
pyproject.toml; without it their rows say how to get them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.common import ROOT

VENV = ROOT / "bench" / ".venv-others"


def commands() -> dict[str, list[str] | None]:
    """Each alternative's start-up command, or None when it is not installed."""
    bindir = VENV / "bin"
    python = bindir / "python"
    out: dict[str, list[str] | None] = {}
    for tool in ("torchx", "sky"):
        exe = bindir / tool
        out[f"{tool} --help"] = [str(exe), "--help"] if exe.exists() else None
    # The dry-run TorchX users would compare ours with: the same 2x8 Slurm job, rendered.
    torchx = bindir / "torchx"
    dry_run = ["run", "-s", "slurm", "--dryrun", "dist.ddp", "-j", "2x8", "--script", "train.py"]
    out["torchx run --dryrun (slurm, 2x8)"] = [str(torchx), *dry_run] if torchx.exists() else None
    has_submitit = python.exists() and _imports(python, "submitit")
    out["import submitit"] = [str(python), "-c", "import submitit"] if has_submitit else None
    return out


def profiler_path() -> Path | None:
    """site-packages of the others' venv, where pyinstrument lives (append it to sys.path)."""
    found = sorted(VENV.glob("lib/python3*/site-packages"))
    return found[0] if found else None


def setup() -> None:
    """Create bench/.venv-others with the `bench` extra's requirements (not anylaunch)."""
    import tomllib  # Python 3.11+, needed by --setup only

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extra = project["optional-dependencies"]["bench"]
    if not (VENV / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    subprocess.run([str(VENV / "bin" / "python"), "-m", "pip", "install", "-q", *extra], check=True)


def _imports(python: Path, module: str) -> bool:
    return (
        subprocess.run([str(python), "-c", f"import {module}"], capture_output=True).returncode == 0
    )
