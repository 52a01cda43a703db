"""JobSpec + context -> Plan for Slurm: the full sbatch script, and how it is submitted.

Pure: the working directory and a user template's text arrive in the PlanContext
(`prepare` reads them), so `--dry-run` never touches a cluster.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, TypedDict

from anylaunch.backends.base import PlanContext
from anylaunch.backends.plan import Plan
from anylaunch.backends.slurm import script, template
from anylaunch.backends.slurm.config import SlurmSection
from anylaunch.errors import ConfigError
from anylaunch.jobfile.spec import JobSpec
from anylaunch.node import checkpoint, shell
from anylaunch.storage import manifest

SCRIPT_FILE = "sbatch.sh"


class SlurmPayload(TypedDict):
    """The sbatch script and how it is submitted."""

    script: str
    script_path: str
    # The login node every Slurm command runs on, over ssh; None: this machine.
    login: str | None
    # The job's folder as the cluster sees it: the job's folder here, or its copy on a
    # cluster reached over ssh (script, logs and snapshot live there).
    run_dir: str
    workdir: str
    nodes: int
    ntasks_per_node: int
    gpus_per_node: int  # GPUs asked of each node (0: none)
    launcher: str
    world_size: int
    requeue: bool
    splits: list[dict[str, Any]]  # an array's tasks: split id, job id, folder, value
    nsys_reports: str | None


def render(spec: JobSpec, ctx: PlanContext) -> Plan[SlurmPayload]:
    section = spec.slurm or SlurmSection()
    _check(spec, section)
    splits = [script.Split(**s) for s in ctx.values.get("splits", [])]
    run_dir = ctx.values.get("run_dir", ctx.job_dir)
    staging = manifest.build(
        spec,
        workdir=ctx.values["workdir"],
        state_dir=f"{run_dir}/staging",
        cache_root=section.cache_root,
    )
    size = spec.per_node("slurm")
    job = script.Job(
        spec=spec,
        section=section,
        job_id=ctx.job_id,
        job_dir=run_dir,
        name=section.job_name or spec.name or ctx.job_id,
        nodes=section.nodes or spec.nodes or 1,
        ntasks=size.ranks,
        gpus=size.gpus,
        workdir=ctx.values["workdir"],
        splits=splits,
        staging=f"{run_dir}/{manifest.MANIFEST_FILE}" if staging is not None else None,
        # The staging step runs the in-job runtime: any python3 on the node will do.
        stage_python=section.python or "python3",
        py_spy=ctx.values.get("py_spy"),
        exclude=list(ctx.values.get("exclude", [])),
    )
    # sbatch opens --output before the script runs; an array's tasks then move their
    # output into their own job directory (see script.setup).
    output = f"{splits[0].job_dir}/logs/array-%a.log" if splits else f"{run_dir}/logs/node-0.log"
    parts = {
        "sbatch": "\n".join(script.sbatch_header(job, output)),
        "setup": "\n".join(script.setup(job)),
        "launch": "\n".join(script.launch(job)),
    }
    text = template.fill(ctx.values.get("template"), parts, file=ctx.values.get("template_path"))
    files = {SCRIPT_FILE: text}
    if staging is not None:
        files[manifest.MANIFEST_FILE] = staging.model_dump_json(indent=2)
    recipe = checkpoint.config_text(spec)
    if recipe is not None:
        # With a checkpoint folder the job writes the newest checkpoint into restore_from.path.
        files[script.RECIPE_FILE] = recipe
    secrets = sorted({*spec.secret_env(), *section.secret_env()})
    report_dir = spec.profile.output_dir if spec.profile and spec.profile.output_dir else None
    return Plan(
        backend="slurm",
        job_id=ctx.job_id,
        name=job.name,
        job_dir=ctx.job_dir,
        nodes=job.nodes,
        payload={
            "script": text,
            "script_path": f"{run_dir}/{SCRIPT_FILE}",
            "login": ctx.values.get("login"),
            "run_dir": run_dir,
            "workdir": job.workdir,
            "nodes": job.nodes,
            "ntasks_per_node": job.ntasks,
            "gpus_per_node": job.gpus,
            "launcher": job.launcher,
            "world_size": job.world_size,
            "requeue": section.requeue,
            "splits": [vars(s) for s in splits],
            "nsys_reports": (
                f"{report_dir or '{job_dir}'}/nsys/{{job_id}}-*.nsys-rep" if job.nsys else None
            ),
        },
        files=files,
        secret_env=secrets,
        code_dir=ctx.values.get("code_dir"),
        snapshot=bool(ctx.values.get("snapshot")),
    )


def sbatch_argv(plan: Plan[SlurmPayload]) -> list[str]:
    """How the script is submitted: secrets named in --export, their values in the environment."""
    export = ",".join(["ALL", *plan.secret_env])
    return ["sbatch", "--parsable", f"--export={export}", plan.payload["script_path"]]


def describe(plan: Plan[SlurmPayload]) -> str:
    """The script as it will be submitted, preceded by the sbatch command line."""
    login = plan.payload.get("login")
    head = ""
    if plan.snapshot:
        head += f"# runs from a copy of {plan.code_dir} made at submit: {plan.payload['workdir']}\n"
    if login:
        head += f"# the job's folder is copied to {login}:{plan.payload['run_dir']}\n"
        head += f"# ssh {login} {shlex.join(sbatch_argv(plan))}"
    else:
        head += f"# {shlex.join(sbatch_argv(plan))}"
    if plan.secret_env:
        channel = "ssh's stdin" if login else "the submitting environment"
        head += f"\n# secrets from {channel}: {', '.join(plan.secret_env)}"
    return f"{head}\n{plan.payload['script']}"


def _check(spec: JobSpec, section: SlurmSection) -> None:
    for where, env in (("env", spec.env), ("slurm.env_vars", section.env_vars)):
        for name in env:
            if not shell.valid_name(name):
                raise ConfigError(
                    f"'{name}' is not a valid environment variable name",
                    file=spec.source,
                    key=f"{where}.{name}",
                    fix="use letters, digits and '_' only, not starting with a digit",
                )
    if section.template and spec.source is None and not Path(section.template).is_absolute():
        raise ConfigError(
            "a relative template path needs a job file to be relative to",
            key="slurm.template",
            fix="give an absolute path",
        )
