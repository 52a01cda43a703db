"""Render a local job: the exact command line and environment of every simulated node.

Pure: everything learned from the machine (free port, GPU count, working directory,
interpreter) arrives in the PlanContext.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, TypedDict

from typing_extensions import NotRequired

from anylaunch.backends.base import PlanContext
from anylaunch.backends.plan import Plan
from anylaunch.errors import ConfigError
from anylaunch.jobfile.spec import JobSpec
from anylaunch.node import checkpoint, command, runtime
from anylaunch.node import script as node_script
from anylaunch.node.rendezvous import Rendezvous

RECIPE_FILE = "recipe.yaml"
AGENT_FILE = "torchrun_agent.py"


class LocalNode(TypedDict):
    node_rank: int
    argv: list[str]
    env: dict[str, str]
    log: str


class LocalWatchdog(TypedDict):
    idle_s: float
    py_spy: str | None  # the submitting environment's py-spy (this machine's)


class LocalPayload(TypedDict):
    """What the supervisor runs: one process per simulated node."""

    workdir: str
    kill_grace_s: float
    nodes: list[LocalNode]
    rdzv_release: NotRequired[str]  # node 0's agent holds the rendezvous until this exists
    nsys_dir: NotRequired[str]
    nsys_reports: NotRequired[str]
    stage_in: NotRequired[list[str]]
    stage_out: NotRequired[list[str]]
    # The hang watchdog, run by the supervisor: `idle_s` without output stops the job.
    watchdog: NotRequired[LocalWatchdog]
    # `notify:`: the supervisor announces the job's end itself, the moment it ends.
    notify: NotRequired[bool]
    # The in-job runtime, written into the job's directory by submit. A zipapp is not
    # text, so it is not among the plan's files: it travels packed (`runtime.packed`).
    runtime: NotRequired[str]
    # A later attempt of the job (its retry policy's): its number, and the file its
    # supervisor writes the result to (each attempt its own: `result.json` is the first's).
    attempt: NotRequired[int]
    result: NotRequired[str]
    # The job has a retry policy: a failed attempt's end is the controller's to decide
    # (another attempt, or the job's end), not the supervisor's to record as the job's.
    controller_decides: NotRequired[bool]


def render(spec: JobSpec, ctx: PlanContext) -> Plan[LocalPayload]:
    values = ctx.values
    section = spec.local
    _check_staging_paths(spec, values["workdir"])
    rdzv = Rendezvous(
        master_addr=section.master_addr if section else "127.0.0.1",
        master_port=values["master_port"],
        nnodes=values["nnodes"],
        nproc_per_node=values["nproc_per_node"],
    )
    job_dir = Path(ctx.job_dir)
    files: dict[str, str] = {}
    checkpoints = checkpoint.checkpoint_dir(spec)
    # With a checkpoint folder, each node's shell finds the newest complete checkpoint
    # (ANYLAUNCH_RESUME_FROM) and writes it into its own copy of the recipe, both through
    # the in-job runtime shipped in the job's directory.
    runtime_path = str(job_dir / runtime.FILE_NAME)
    runtime_word = shlex.quote(runtime_path)
    before = [checkpoint.shell(checkpoints, runtime_word)] if checkpoints else []
    recipe = checkpoint.config_text(spec)
    recipe_used = recipe is not None
    fill_step = checkpoint.config_fill(spec, '"$ANYLAUNCH_RECIPE"', runtime_word)
    fill = bool(fill_step)
    if recipe is not None:
        files[RECIPE_FILE] = recipe
        if fill:
            before.append(f'cp {shlex.quote(str(job_dir / RECIPE_FILE))} "$ANYLAUNCH_RECIPE"')
            before.append(fill_step)

    profile = spec.profile if spec.profile and spec.profile.enabled(spec) else None
    nsys_dir = f"{(profile.output_dir if profile and profile.output_dir else str(job_dir))}/nsys"
    agent = str(job_dir / AGENT_FILE)
    torchrun = command.Torchrun(
        nproc_per_node=rdzv.nproc_per_node,
        launcher=(values["python"], agent),
        max_restarts=section.max_restarts if section else 0,
        entry=(agent,),
    )
    # Node 0's agent hosts the rendezvous store: it stays open until every other node
    # has ended (see torchrun_agent.py).
    attempt = int(values.get("attempt", 1))
    suffix = f"-{attempt}" if attempt > 1 else ""
    release = str(job_dir / f"rendezvous-released{suffix}")
    hold = spec.launcher == "torchrun" and rdzv.nnodes > 1
    nodes: list[LocalNode] = []
    for rank in range(rdzv.nnodes):
        env = {
            **rdzv.node_env(rank, spec.launcher),
            "ANYLAUNCH_JOB_ID": ctx.job_id,
            "ANYLAUNCH_JOB_DIR": str(job_dir),
        }
        if hold and rank == 0:
            env["ANYLAUNCH_RDZV_RELEASE"] = release
        gpus = _gpus_of(spec, values, rank)
        if gpus is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpus
        # Each node reads its own copy when it fills in the checkpoint: no two shells
        # rewrite one file.
        recipe_path = str(job_dir / (f"recipe-node-{rank}.yaml" if fill else RECIPE_FILE))
        if recipe_used:
            env["ANYLAUNCH_RECIPE"] = recipe_path
        wrap: list[str] = []
        if profile is not None:  # the whole node's process tree under nsys
            report = f"{nsys_dir}/{ctx.job_id}-node{rank}"
            wrap = ["nsys", "profile", "-o", report, "--force-overwrite=true", *profile.nsys_args]
        text = node_script.render(
            node_script.NodeScript(
                command=spec.command,
                launcher=spec.launcher,
                torchrun=torchrun,
                env=spec.public_env(),
                before=before,
                pre=spec.hooks.pre,
                post=spec.hooks.post,
                config=recipe_path,
                wrap=wrap,
            )
        )
        nodes.append(
            {
                "node_rank": rank,
                "argv": ["bash", "-c", text, f"anylaunch-node-{rank}"],
                "env": env,
                "log": str(job_dir / "logs" / f"node-{rank}.log"),
            }
        )
    if spec.launcher == "torchrun":
        files[AGENT_FILE] = _agent_source()
    payload: LocalPayload = {
        "workdir": values["workdir"],
        "kill_grace_s": section.kill_grace_s if section else 10.0,
        "nodes": nodes,
    }
    if hold:
        payload["rdzv_release"] = release
    if spec.watchdog is not None:
        payload["watchdog"] = {"idle_s": spec.watchdog.idle, "py_spy": values.get("py_spy")}
    if spec.notify:
        payload["notify"] = True
    if attempt > 1:
        payload["attempt"] = attempt
        payload["result"] = f"result{suffix}.json"
    if spec.retry is not None and spec.retry.max_attempts > 1:
        payload["controller_decides"] = True
    if profile is not None:
        payload["nsys_dir"] = nsys_dir
        payload["nsys_reports"] = f"{nsys_dir}/*.nsys-rep"
    # One machine: inputs are staged once for all simulated nodes, by the supervisor.
    staging = None
    if spec.inputs or spec.outputs:  # the manifest's models load only for a job that stages
        from anylaunch.storage import manifest

        staging = manifest.build(
            spec,
            workdir=values["workdir"],
            state_dir=str(job_dir / "staging"),
            cache_root=values["cache_root"],
        )
        if staging is not None:
            files[manifest.MANIFEST_FILE] = staging.model_dump_json(indent=2)
            path = str(job_dir / manifest.MANIFEST_FILE)
            payload["stage_in"] = runtime.local_argv(runtime_path, "stage", "in", path)
            if staging.outputs:
                payload["stage_out"] = runtime.local_argv(runtime_path, "stage", "out", path)
    if checkpoints or staging is not None:
        payload["runtime"] = runtime.packed()
    return Plan(
        backend="local",
        job_id=ctx.job_id,
        name=spec.name or ctx.job_id,
        job_dir=str(job_dir),
        nodes=len(payload["nodes"]),
        payload=payload,
        files=files,
        secret_env=sorted(spec.secret_env()),
        code_dir=values.get("code_dir"),
        snapshot=bool(values.get("snapshot")),
    )


def _gpus_of(spec: JobSpec, values: Mapping[str, Any], rank: int) -> str | None:
    """CUDA_VISIBLE_DEVICES of simulated node `rank`: its own share of this machine's GPUs
    (`gpus_per_node` of them, as a cluster node would give), none for ranks that run
    without GPUs, and what the machine shows for a job that says neither."""
    gpus = values.get("gpus_per_node", 0)
    if gpus:
        return ",".join(values.get("gpus", [])[rank * gpus : (rank + 1) * gpus])
    return "" if spec.ranks_per_node is not None else None


def _check_staging_paths(spec: JobSpec, workdir: str) -> None:
    """Path safety: on this machine an input link or an uploaded output must stay inside
    the job's working directory — `/etc/passwd` as an output would upload it."""
    root = Path(workdir)
    for key, paths in (("inputs", spec.inputs), ("outputs", spec.outputs)):
        for path in paths:
            target = root / path
            if not target.is_absolute() or not _inside(target, root):
                raise ConfigError(
                    f"{path} is outside the job's working directory {root}",
                    file=spec.source,
                    key=f"{key}.{path}",
                    fix="use a path relative to local.workdir (or inside it)",
                )


def _inside(path: Path, root: Path) -> bool:
    try:
        Path(os.path.normpath(path)).relative_to(os.path.normpath(root))
    except ValueError:
        return False
    return True


def describe(plan: Plan[LocalPayload]) -> str:
    """The plan as a person reads it: one shell line per node."""
    out = []
    for node in plan.payload["nodes"]:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in node["env"].items())
        out.append(f"# node {node['node_rank']} (log: {node['log']})")
        out.append(f"# cd {shlex.quote(plan.payload['workdir'])} && env {env} bash <<script")
        out.append(node["argv"][2].rstrip("\n"))
    if plan.secret_env:
        out.append(
            f"# secrets passed from the submitting environment: {', '.join(plan.secret_env)}"
        )
    return "\n".join(out)


@cache
def _agent_source() -> str:
    return resources.files(__package__).joinpath(AGENT_FILE).read_text(encoding="utf-8")
