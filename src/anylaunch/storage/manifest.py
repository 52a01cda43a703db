"""What a job's stage-in and stage-out steps do, written into the job by the backend.

The steps run inside the job (`python3 -I -S anylaunch_job.pyz stage in|out MANIFEST`,
the in-job runtime) and need nothing but python3's standard library there; this JSON
file is all they read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from anylaunch.jobfile.spec import JobSpec

MANIFEST_FILE = "staging.json"


class _Staged(BaseModel):
    # Built on first use: only a job that stages something writes a manifest, and every
    # plan module imports this one.
    model_config = ConfigDict(defer_build=True)


class StageInput(_Staged):
    path: str  # where the program reads it (relative paths: the job's working directory)
    uri: str  # s3://bucket/key (object or prefix) or a local path
    unpack: bool = False  # .tar/.tar.gz/.tgz: present the unpacked tree instead


class StageOutput(_Staged):
    path: str  # where the program writes it
    uri: str  # s3://bucket/prefix it is uploaded to


class Manifest(_Staged):
    workdir: str
    state_dir: str  # per-job scratch: uncached inputs, upload progress, summaries
    cache_root: str | None = None  # a shared filesystem that outlives the job, if any
    inputs: list[StageInput] = Field(default_factory=list)
    outputs: list[StageOutput] = Field(default_factory=list)


def build(
    spec: JobSpec, *, workdir: str, state_dir: str, cache_root: str | None
) -> Manifest | None:
    """The manifest for a JobSpec, or None when the job stages nothing."""
    if not spec.inputs and not spec.outputs:
        return None
    return Manifest(
        workdir=workdir,
        state_dir=state_dir,
        cache_root=cache_root,
        inputs=[StageInput(path=p, uri=i.uri, unpack=i.unpack) for p, i in spec.inputs.items()],
        outputs=[StageOutput(path=p, uri=uri) for p, uri in spec.outputs.items()],
    )
