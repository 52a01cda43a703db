"""The `slurm:` section: AutoModel's SlurmConfig fields and what real users need next.

AutoModel's fields come first and keep their names and defaults (master_port 13742), so
an AutoModel recipe's `slurm:` block works as written. The
rest maps one-to-one onto sbatch options, so a Slurm user finds what they already know.
Durations accept Slurm's own spellings; YAML reads an unquoted `04:00:00` as a number of
seconds (base 60), so numbers are taken as seconds too.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import (
    AliasChoices,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from anylaunch.backends.section import Sized
from anylaunch.backends.slurm import gres as slurm_gres
from anylaunch.jobfile.envvars import AutoModelEnv
from anylaunch.jobfile.mounts import Mount

_DURATION = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d{1,2}))?(?::(\d{1,2}))?$")
_TIME = re.compile(r"^(\d+-)?\d{1,2}:\d{2}:\d{2}$")
_MEM = re.compile(r"^\d+[KMGT]?$")
SIGNALS = ("USR1", "USR2", "TERM", "INT", "HUP", "URG")


def duration_seconds(value: str | int) -> int:
    """Seconds in a duration: a number of seconds, `MM:SS`, `HH:MM:SS` or `D-HH[:MM[:SS]]`."""
    if isinstance(value, int):
        return value
    match = _DURATION.match(value.strip())
    if not match:
        raise ValueError(f"'{value}' is not a duration such as 600, '10:00' or '01:00:00'")
    days, first, second, third = match.groups()
    parts = [int(p) for p in (first, second, third) if p is not None]
    if days is not None:  # D-HH, D-HH:MM, D-HH:MM:SS
        parts += [0] * (3 - len(parts))
        return int(days) * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]
    if len(parts) == 1:  # a bare number is seconds, as everywhere else in anylaunch
        return parts[0]
    if len(parts) == 2:
        return parts[0] * 60 + parts[1]
    return parts[0] * 3600 + parts[1] * 60 + parts[2]


def slurm_time(seconds: int) -> str:
    """Seconds as Slurm's `[D-]HH:MM:SS`."""
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    text = f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


class VolumeMapping(Mount):
    """A bind mount into the Pyxis container: `source` on the nodes -> `dest` inside."""

    def pyxis(self) -> str:
        return f"{self.source}:{self.dest}" + (":ro" if self.readonly else "")


class SlurmSection(AutoModelEnv, Sized):
    """Every key of the `slurm:` section; unknown keys are errors with a suggestion."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    size_keys: ClassVar[tuple[str, str]] = ("nodes", "ntasks_per_node")
    gpu_key: ClassVar[str | None] = "gpus_per_node"

    # -- AutoModel's SlurmConfig fields --
    job_name: str | None = None
    nodes: int | None = Field(default=None, ge=1)
    ntasks_per_node: int | None = Field(default=None, ge=1, description="ranks per node")
    time: str | None = Field(default=None, description="HH:MM:SS or D-HH:MM:SS")
    account: str | None = None
    partition: str | None = None
    container_image: str | None = Field(default=None, description="Pyxis/Enroot image")
    nemo_mount: VolumeMapping | None = None
    hf_home: str | None = None
    extra_mounts: list[VolumeMapping] = Field(default_factory=list)
    master_port: int = Field(default=13742, ge=1, le=65535)
    # env_vars, hf_token, wandb_key: AutoModelEnv's. The credentials reach the job as
    # secrets (the submit environment), never written into the script.
    nsys_enabled: bool = False
    # AutoModel's source tree on the nodes: mounted at the same path in the container
    # (as nemo_mount, when that is not given), first on PYTHONPATH, and the job's working
    # directory unless one is given.
    repo_root: str | None = None
    job_dir: str | None = Field(
        default=None,
        description="folder (on the shared filesystem) for the job's directory; with"
        " `login`, a folder on the cluster (default ~/.anylaunch/jobs there)",
    )

    # -- a cluster reached from this machine over ssh --
    login: str | None = Field(
        default=None,
        description="[user@]host[:port] or an ssh alias of the cluster's login node; every"
        " Slurm command runs there (default: $ANYLAUNCH_SLURM_LOGIN, else this machine)",
    )

    # -- resources --
    # The GPUs of every node; the neutral gpus_per_node says the same (and is rendered
    # as --gpus-per-node when this is not written).
    gpus_per_node: int | None = Field(default=None, ge=0, description="--gpus-per-node")
    gres: str | None = Field(
        default=None, description="--gres, e.g. gpu:h100:8; GPUs in it replace --gpus-per-node"
    )
    cpus_per_task: int | None = Field(default=None, ge=1)
    mem: str | None = Field(default=None, description="--mem per node, e.g. 64G")
    exclusive: bool = False
    constraint: str | None = None
    qos: str | None = None
    reservation: str | None = None
    dependency: str | None = Field(default=None, description="e.g. afterok:1234")
    array_parallelism: int | None = Field(default=None, ge=1, description="splits at once (%N)")

    # -- time limit, preemption: checkpoint before the kill --
    signal: str | None = Field(default="USR1", description="sent before the time limit; null: off")
    signal_lead: int = Field(default=600, ge=1, le=65535, description="seconds before the limit")
    requeue: bool = True
    checkpoint_write_time: int | None = Field(
        default=None, ge=0, description="how long a checkpoint write takes (preflight)"
    )

    # -- script --
    sbatch_lines: list[str] = Field(default_factory=list, description="extra #SBATCH options")
    template: str | None = Field(default=None, description="a user's sbatch template file")
    python: str | None = Field(default=None, description="interpreter on the nodes (torchrun)")
    workdir: str | None = Field(
        default=None,
        description="--chdir; relative to the job file (AutoModel's name: chdir)",
        validation_alias=AliasChoices("workdir", "chdir"),
    )
    cache_root: str | None = Field(
        default=None, description="shared-filesystem cache for S3 inputs (default: the job's dir)"
    )

    @field_validator("time", mode="before")
    @classmethod
    def _time_format(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            if value <= 0:
                raise ValueError("must be positive")
            return slurm_time(value)  # YAML's reading of an unquoted 04:00:00
        if isinstance(value, str) and not _TIME.match(value):
            raise ValueError(f"'{value}' is not HH:MM:SS or D-HH:MM:SS")
        return value

    @field_validator("signal_lead", "checkpoint_write_time", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        return duration_seconds(value) if isinstance(value, str) else value

    @field_validator("signal", mode="before")
    @classmethod
    def _signal_name(cls, value: Any) -> Any:
        if value is None or value is False:
            return None
        if not isinstance(value, str):
            return value
        name = value.upper().removeprefix("SIG")
        if name not in SIGNALS:
            raise ValueError(f"'{value}' is not one of {', '.join(SIGNALS)} (or null)")
        return name

    @field_validator("login")
    @classmethod
    def _login_form(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from anylaunch.backends.slurm.login import Login

        return Login.parse(value).text

    @field_validator("mem")
    @classmethod
    def _mem_format(cls, value: str | None) -> str | None:
        if value is not None and not _MEM.match(value):
            raise ValueError(f"'{value}' is not a size such as 64G or 500M")
        return value

    @field_validator("sbatch_lines")
    @classmethod
    def _sbatch_lines(cls, value: list[str]) -> list[str]:
        lines = []
        for line in value:
            option = line.strip().removeprefix("#SBATCH").strip()
            if not option.startswith("-") or "\n" in option:
                raise ValueError(f"'{line}' is not an sbatch option such as --mail-type=END")
            lines.append(option)
        return lines

    def gpus(self) -> int | None:
        """--gpus-per-node, else the GPUs a `--gres` request names."""
        if self.gpus_per_node is not None:
            return self.gpus_per_node
        wanted = slurm_gres.requested(self.gres)
        return wanted[0] if wanted else None

    def gpus_key(self) -> str:
        return "gres" if self.gpus_per_node is None and self.gres else "gpus_per_node"

    @model_validator(mode="after")
    def _gpus_once(self) -> SlurmSection:
        # Given both, sbatch allocates the --gres count and still exports the other as
        # SLURM_GPUS_PER_NODE: the job would be told a number of GPUs it does not have.
        if self.gpus_per_node is not None and slurm_gres.requested(self.gres):
            raise ValueError(
                f"gres '{self.gres}' asks for GPUs and so does gpus_per_node; write the"
                " GPUs in one of them"
            )
        return self

    @model_validator(mode="after")
    def _repo_root(self) -> SlurmSection:
        if self.repo_root:
            root = self.repo_root
            # As nemo_mount: mounted at the same path and put first on PYTHONPATH.
            if self.nemo_mount is None:
                self.nemo_mount = VolumeMapping(source=root, dest=root)
            elif not any(str(m.dest) == root for m in self.extra_mounts):
                self.extra_mounts.append(VolumeMapping(source=root, dest=root))
            if self.workdir is None:
                self.workdir = root
        return self
