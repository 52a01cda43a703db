"""JobSpec + context -> Plan whose payload is the SkyPilot task (the YAML `sky launch` reads).

Pure and import-free: no SkyPilot, no network, no clock. `validate.py` then hands the
task to the real library. Spot jobs become managed jobs with a recovery strategy and a
checkpoint directory on a bucket mount, so a preempted job comes back from its newest
checkpoint; everything else is a plain cluster launch.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any, TypedDict

import yaml

from anylaunch.backends.base import PlanContext
from anylaunch.backends.plan import Plan
from anylaunch.backends.skypilot.config import Candidate, SkyPilotSection, accelerator_count
from anylaunch.errors import ConfigError
from anylaunch.jobfile.spec import JobSpec
from anylaunch.jobfile.yamlsrc import line_of
from anylaunch.node import checkpoint, command, rendezvous, runtime
from anylaunch.node import script as node_script
from anylaunch.node.shell import Sh, Word, has_reference, var

TASK_FILE = "task.yaml"
RECIPE_ENV = "ANYLAUNCH_RECIPE"
# A cluster anylaunch names itself is torn down after this many idle minutes.
DEFAULT_IDLE_MINUTES = 10


class SkyPilotPayload(TypedDict):
    """The SkyPilot task and how it is launched."""

    mode: str  # "managed" (sky jobs launch) or "cluster" (sky launch)
    cluster_name: str | None
    owns_cluster: bool
    task: dict[str, Any]
    checkpoint_dir: str | None


def render(spec: JobSpec, ctx: PlanContext) -> Plan[SkyPilotPayload]:
    section = spec.skypilot or SkyPilotSection()
    _check(spec, section)
    values = ctx.values
    managed = section.is_managed
    name = slug(section.job_name or spec.name or "anylaunch")
    nodes = section.num_nodes or spec.nodes or 1
    nproc = spec.per_node("skypilot").ranks
    section = with_gpu_count(spec, section)
    ckpt_dir = checkpoint_mount_path(spec, section, values.get("workdir"))

    envs = {**spec.public_env(), **section.public_env()}
    if section.hf_home:
        envs.setdefault("HF_HOME", section.hf_home)
    run = run_script(
        spec, ctx.job_id, nproc=nproc, port=section.master_port, ckpt_dir=ckpt_dir, env=envs
    )
    secret_env = sorted({*spec.secret_env(), *section.secret_env()})

    task: dict[str, Any] = {"name": name}
    if values.get("workdir"):
        task["workdir"] = values["workdir"]
    task["num_nodes"] = nodes
    task["resources"] = resources(
        spec, section, managed=managed, cluster_named=bool(section.cluster_name)
    )
    # A value that names a variable is set by the run script alone: given to SkyPilot as
    # well, `PATH: /x:$PATH` would arrive as literal text and expand to itself.
    fixed = {k: v for k, v in envs.items() if not has_reference(v)}
    if fixed:
        task["envs"] = fixed
    if secret_env:
        # Null values are SkyPilot's "secret by reference": filled in at submit only.
        task["secrets"] = {k: None for k in secret_env}
    mounts = file_mounts(spec, section, ctx.job_id, name, ckpt_dir, managed)
    if mounts:
        task["file_mounts"] = mounts
    if section.setup:
        task["setup"] = section.setup
    task["run"] = run

    cluster = None if managed else (section.cluster_name or f"{name}-{ctx.job_id}")[:63]
    payload: SkyPilotPayload = {
        "mode": "managed" if managed else "cluster",
        "cluster_name": cluster,
        "owns_cluster": not managed and not section.cluster_name,
        "task": task,
        "checkpoint_dir": ckpt_dir,
    }
    return Plan(
        backend="skypilot",
        job_id=ctx.job_id,
        name=name,
        job_dir=ctx.job_dir,
        nodes=nodes,
        payload=payload,
        files={TASK_FILE: task_yaml(task)},
        secret_env=secret_env,
    )


def run_script(
    spec: JobSpec,
    job_id: str,
    *,
    nproc: int,
    port: int,
    ckpt_dir: str | None,
    env: dict[str, str],
) -> str:
    """The task's `run`: SkyPilot's node variables -> rendezvous, resume, hooks, program."""
    exports: dict[str, Word] = {}
    if spec.launcher == "none":
        exports["WORLD_SIZE"] = var("NNODES")  # TAO convention: number of nodes
    exports["ANYLAUNCH_JOB_ID"] = job_id
    # Per node: virtual nodes of one host (the devstack) must not share files.
    runtime_word = f'"${{TMPDIR:-/tmp}}/anylaunch-{job_id}-node$NODE_RANK/{runtime.FILE_NAME}"'
    before: list[str] = []
    resume_step = checkpoint.shell(ckpt_dir, runtime_word, image=spec.image)
    if resume_step:
        before += [
            "# resume contract: the newest complete checkpoint (anylaunch.node.checkpoint)",
            resume_step,
        ]
    files: list[node_script.File] = []
    text = checkpoint.config_text(spec)
    if text is not None:
        # Per node: virtual nodes of one host (the devstack) must not share the file.
        exports[RECIPE_ENV] = Sh(f'"${{TMPDIR:-/tmp}}/anylaunch-{job_id}-node$NODE_RANK.yaml"')
        files.append(node_script.File(var(RECIPE_ENV), text))
        fill = checkpoint.config_fill(spec, f'"${RECIPE_ENV}"', runtime_word)
        if fill:
            before.append(fill)
    if before:
        # The in-job runtime travels in the run script: nothing is downloaded at start.
        before.insert(0, runtime.write_shell(runtime_word, spec.image, "resume"))
    # `/opt/venv/bin/python train.py` runs torchrun under that interpreter (the command's
    # own absolute python wins); otherwise the image's python.
    return node_script.render(
        node_script.NodeScript(
            command=spec.command,
            launcher=spec.launcher,
            torchrun=command.Torchrun(nproc, launcher=("python", "-m", "torch.distributed.run")),
            rendezvous=rendezvous.skypilot(port, nproc),
            exports=exports,
            # SkyPilot sets the env: values without `$NAME`; the script exports the rest.
            env=env,
            env_references_only=True,
            files=files,
            before=before,
            pre=spec.hooks.pre,
            post=spec.hooks.post,
            config=var(RECIPE_ENV),
        )
    )


def resources(
    spec: JobSpec, section: SkyPilotSection, *, managed: bool, cluster_named: bool
) -> dict[str, Any]:
    out = _resource_fields(section)
    image = section.image_id or (f"docker:{spec.image}" if spec.image else None)
    if image:
        out["image_id"] = image
    if section.any_of:
        out["any_of"] = [_resource_fields(c) for c in section.any_of]
    if managed:
        out["job_recovery"] = {
            "strategy": section.recovery_strategy,
            "max_restarts_on_errors": section.max_restarts_on_errors,
        }
        return out
    idle = section.idle_minutes_to_autostop
    down = section.down if section.down is not None else not cluster_named
    if idle is None and down and not cluster_named:
        idle = DEFAULT_IDLE_MINUTES
    if idle is not None:
        out["autostop"] = {"idle_minutes": idle, "down": bool(down)}
    return out


def with_gpu_count(spec: JobSpec, section: SkyPilotSection) -> SkyPilotSection:
    """The section whose accelerators carry `gpus_per_node` as their count ("H100" with
    gpus_per_node: 8 -> "H100:8"), in every `any_of` entry too. SkyPilot has no GPUs
    without a type, so gpus_per_node alone is an error that asks for one."""
    gpus = spec.gpus_per_node
    if gpus is None:
        return section
    if not section.asks_for_gpus():
        raise ConfigError(
            f"asks for {gpus} GPUs per node, but SkyPilot needs their type",
            file=spec.source,
            line=line_of(spec.source, ("gpus_per_node",)),
            key="gpus_per_node",
            fix="name it in skypilot.accelerators, e.g. accelerators: H100 (the count comes"
            " from gpus_per_node)",
        )
    candidates = []
    for i, candidate in enumerate(section.any_of):
        count = accelerator_count(candidate.accelerators)
        if count not in (None, gpus):
            raise ConfigError(
                f"{candidate.accelerators} disagrees with gpus_per_node: {gpus}",
                file=spec.source,
                line=line_of(spec.source, ("skypilot", "any_of", i, "accelerators")),
                key=f"skypilot.any_of.{i}.accelerators",
                fix="write the type alone (the count comes from gpus_per_node)",
            )
        candidates.append(
            candidate.model_copy(update={"accelerators": _counted(candidate.accelerators, gpus)})
        )
    return section.model_copy(
        update={"accelerators": _counted(section.accelerators, gpus), "any_of": candidates}
    )


def _counted(accelerators: str | None, gpus: int) -> str | None:
    return f"{accelerators.partition(':')[0]}:{gpus}" if accelerators else None


def _resource_fields(part: SkyPilotSection | Candidate) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if part.cloud:
        out["infra"] = "/".join(p for p in (part.cloud, part.region, part.zone) if p)
    for key in ("accelerators", "instance_type", "cpus", "memory", "disk_size"):
        value = getattr(part, key)
        if value is not None:
            out[key] = value
    if part.use_spot:
        out["use_spot"] = True
    if isinstance(part, Candidate) and part.image_id:
        out["image_id"] = part.image_id
    return out


def checkpoint_mount_path(
    spec: JobSpec, section: SkyPilotSection, workdir: str | None
) -> str | None:
    """The checkpoint directory as the node sees it (SkyPilot mounts need absolute paths).

    `run` starts in ~/sky_workdir when a workdir is synced, else in ~, so a relative
    `checkpoint.dir` (AutoModel's default `checkpoints/`) lives there.
    """
    folder = checkpoint.checkpoint_dir(spec)
    if folder is None or folder.startswith(("/", "~")):
        return folder
    base = "~/sky_workdir" if workdir else "~"
    return posixpath.normpath(posixpath.join(base, folder))


def file_mounts(
    spec: JobSpec,
    section: SkyPilotSection,
    job_id: str,
    name: str,
    ckpt_dir: str | None,
    managed: bool,
) -> dict[str, Any]:
    mounts: dict[str, Any] = {}
    for dest, source in spec.inputs.items():
        mounts[_node_path(dest)] = (
            {"source": source.uri, "mode": "COPY"} if "://" in source.uri else source.uri
        )
    for dest, uri in spec.outputs.items():
        mounts[_node_path(dest)] = {"source": uri, "mode": "MOUNT"}
    mounts.update(section.file_mounts)
    if ckpt_dir and (section.checkpoint_bucket or managed) and ckpt_dir not in mounts:
        # The disk of a preempted spot VM is gone; its checkpoints must not be.
        mount: dict[str, Any] = {"mode": section.checkpoint_mount_mode}
        if section.checkpoint_bucket:
            mount["source"] = section.checkpoint_bucket
        else:
            mount["name"] = checkpoint_bucket_name(name, job_id)
        mounts[ckpt_dir] = mount
    return mounts


def checkpoint_bucket_name(name: str, job_id: str) -> str:
    """A bucket SkyPilot creates for the job: unique per job, valid on S3 and GCS."""
    return f"anylaunch-ckpt-{name[:30].strip('-')}-{job_id}"


def _node_path(dest: str) -> str:
    return dest if dest.startswith(("/", "~")) else posixpath.join("~/sky_workdir", dest)


def slug(text: str) -> str:
    """A SkyPilot task/cluster name: lower case letters, digits and '-', a letter first."""
    out = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    if not out or not out[0].isalpha():
        out = f"job-{out}".rstrip("-")
    return out[:40].rstrip("-")


def _literal_blocks(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


# libyaml's emitter when PyYAML has it: the same text, ~5x faster than the pure-Python
# one, which took most of a split's rendering time in a 1,000-split run.
_TaskDumper: Any = type("_TaskDumper", (getattr(yaml, "CSafeDumper", yaml.SafeDumper),), {})
_TaskDumper.add_representer(str, _literal_blocks)


def task_yaml(task: dict[str, Any]) -> str:
    """The task as `sky launch TASK.yaml` reads it; `run` and `setup` as literal blocks."""
    return yaml.dump(task, Dumper=_TaskDumper, sort_keys=False, width=100)


def _check(spec: JobSpec, section: SkyPilotSection) -> None:
    for dest, source in spec.inputs.items():
        if source.unpack:
            raise ConfigError(
                "unpack is not supported by the skypilot backend",
                file=spec.source,
                line=line_of(spec.source, ("inputs", dest)),
                key=f"inputs.{dest}.unpack",
                fix="mount the archive and unpack it in a pre hook",
            )
