"""Render a Lepton job: the plan's payload is the exact body of `POST /jobs`.

Pure: the shape, node group id, mounts and pull secrets were resolved in `prepare` and
arrive in the PlanContext. Secret env values never enter the body: each one is a
`value_from.secret_name_ref` to a workspace secret that `submit` creates.
"""

from __future__ import annotations

import copy
import json
import shlex
from collections.abc import Mapping
from typing import Any, TypedDict, cast

from anylaunch.backends.base import PlanContext
from anylaunch.backends.lepton.config import LeptonSection, located_error
from anylaunch.backends.lepton.names import job_name, secret_name
from anylaunch.backends.lepton.rest import wire
from anylaunch.backends.lepton.rest.rules import DEFAULT_PRIORITY_CLASS, RESERVED_ENV_NAMES
from anylaunch.backends.plan import Plan
from anylaunch.errors import ConfigError
from anylaunch.jobfile.spec import JobSpec
from anylaunch.node import checkpoint, command, rendezvous, runtime
from anylaunch.node import script as node_script
from anylaunch.node.shell import has_reference
from anylaunch.storage import manifest

RECIPE_PATH = "/tmp/anylaunch/recipe.yaml"
STAGING_DIR = "/tmp/anylaunch"
RUNTIME_PATH = f"{STAGING_DIR}/{runtime.FILE_NAME}"
RUNTIME_WORD = shlex.quote(RUNTIME_PATH)
LABEL_JOB_ID = "anylaunch-job-id"
LABEL_ATTEMPT = "anylaunch-attempt"


class LeptonPayload(TypedDict):
    """The job body as the workspace API takes it (`wire.LeptonJob.body()`)."""

    metadata: dict[str, Any]
    spec: dict[str, Any]


def render(spec: JobSpec, ctx: PlanContext) -> Plan[LeptonPayload]:
    section = spec.lepton or LeptonSection()
    values = ctx.values
    if not spec.image:
        raise ConfigError(
            "Lepton runs containers and needs an image",
            file=spec.source,
            key="image",
            fix="add 'image:', e.g. nvcr.io/nvidia/pytorch:25.08-py3",
        )
    nodes, ranks = values["num_nodes"], values["ranks_per_node"]
    files: list[node_script.File] = []
    # The resume contract: each attempt (an eviction's resubmission too) starts from the
    # newest complete checkpoint on the shared volume.
    folder = checkpoint.checkpoint_dir(spec)
    before = [checkpoint.shell(folder, RUNTIME_WORD, image=spec.image)] if folder else []
    recipe = checkpoint.config_text(spec)
    if recipe is not None:
        files.append(node_script.File(RECIPE_PATH, recipe))
        fill = checkpoint.config_fill(spec, shlex.quote(RECIPE_PATH), RUNTIME_WORD)
        before += [fill] if fill else []
    after: list[str] = []
    # S3 staging inside the job, through the node group's shared volume when there is
    # one: every replica stages in (the cache's locks fetch each object once), worker 0
    # uploads the outputs. The in-job runtime does it; the image needs only python3.
    mounts = values.get("mounts") or []
    staging = manifest.build(
        spec,
        workdir=".",
        state_dir=f"{STAGING_DIR}/{ctx.job_id}/state",
        cache_root=mounts[0]["mount_path"] if mounts else None,
    )
    if staging is not None:
        where = f"{STAGING_DIR}/{ctx.job_id}/{manifest.MANIFEST_FILE}"
        files.append(node_script.File(where, staging.model_dump_json(indent=2)))
        stage = runtime.shell(RUNTIME_WORD, "stage", "in", shlex.quote(where))
        before.append(f"{stage} || exit $?")
        if spec.outputs:
            stage = runtime.shell(RUNTIME_WORD, "stage", "out", shlex.quote(where))
            after.append(
                f'if [ "$NODE_RANK" = 0 ]; then {stage} || {{ [ "$rc" = 0 ] && rc=1; }}; fi'
            )
    if before:
        # The in-job runtime travels in the command: nothing is downloaded at start.
        first = "resume" if folder else "stage-in"
        before.insert(0, runtime.write_shell(RUNTIME_WORD, spec.image, first))
    script = node_script.render(
        node_script.NodeScript(
            command=spec.command,
            launcher=spec.launcher,
            torchrun=command.Torchrun(ranks, launcher=("python3", "-m", "torch.distributed.run")),
            rendezvous=rendezvous.lepton(),
            # The platform sets the env: values without `$NAME`; the script exports the rest.
            env={**spec.public_env(), **section.env_vars},
            env_references_only=True,
            files=files,
            before=before,
            pre=spec.hooks.pre,
            post=spec.hooks.post,
            after=after,
            config=RECIPE_PATH,
        )
    )
    secret_env = sorted(k for k in spec.secret_env() if k not in section.secrets)
    body = wire.LeptonJob(
        metadata=wire.Metadata(
            id=job_name(spec.name, ctx.job_id),
            labels={LABEL_JOB_ID: ctx.job_id, LABEL_ATTEMPT: "1"},
        ),
        spec=wire.JobUserSpec(
            resource_shape=values["shape"],
            affinity=(
                wire.Affinity(
                    allowed_dedicated_node_groups=[values["node_group_id"]],
                    # kept off the nodes where earlier attempts failed (backend.keep_off)
                    allowed_nodes_in_node_group=values.get("allowed_nodes") or None,
                )
                if values.get("node_group_id")
                else None
            ),
            container=wire.Container(image=spec.image, command=["/bin/bash", "-c", script]),
            shared_memory_size=section.shared_memory_size,
            completions=nodes,
            parallelism=nodes,
            max_failure_retry=section.max_failure_retry,
            max_job_failure_retry=section.max_job_failure_retry,
            envs=_envs(spec, section, ctx.job_id, nodes, ranks, secret_env),
            mounts=[wire.Mount.model_validate(m) for m in values.get("mounts", [])],
            image_pull_secrets=list(values.get("pull_secrets", [])),
            ttl_seconds_after_finished=section.ttl_seconds_after_finished,
            intra_job_communication=True if nodes > 1 else None,
            queue_config=_queue(section),
        ),
    )
    payload = cast(LeptonPayload, body.body())
    payload["spec"].setdefault("ttl_seconds_after_finished", 600)  # the SDK's default
    return Plan(
        guesses=_guesses(payload, values),
        backend="lepton",
        job_id=ctx.job_id,
        name=payload["metadata"]["id"],
        job_dir=ctx.job_dir,
        nodes=nodes,
        payload=payload,
        files={},
        secret_env=secret_env,
    )


def _envs(
    spec: JobSpec,
    section: LeptonSection,
    job_id: str,
    nodes: int,
    ranks: int,
    secret_env: list[str],
) -> list[wire.EnvVar]:
    plain: dict[str, str] = {**spec.public_env(), **section.env_vars}
    plain["NUM_GPU_PER_NODE"] = str(ranks)  # the TAO entrypoint starts this many ranks
    if spec.launcher == "none":
        plain["WORLD_SIZE"] = str(nodes)  # TAO convention: number of nodes
    _check_reserved(spec, [*spec.env, *section.env_vars])
    plain["ANYLAUNCH_JOB_ID"] = job_id
    plain.setdefault("ANYLAUNCH_ATTEMPT", "1")  # a retried split says which attempt it is
    if spec.checkpoint and spec.checkpoint.dir:
        plain["ANYLAUNCH_CHECKPOINT_DIR"] = spec.checkpoint.dir
    if spec.inputs:
        inputs = {dest: _uri(source) for dest, source in spec.inputs.items()}
        plain["ANYLAUNCH_INPUTS"] = json.dumps(inputs, sort_keys=True)
    if spec.outputs:
        plain["ANYLAUNCH_OUTPUTS"] = json.dumps(spec.outputs, sort_keys=True)
    _check_uris(spec)
    # A value that names a variable is exported by the script alone: in the container's
    # environment too, `PATH: /x:$PATH` would be literal text and expand to itself.
    envs = [wire.EnvVar(name=k, value=v) for k, v in plain.items() if not has_reference(v)]
    refs = {k: secret_name(job_id, k) for k in secret_env}
    refs.update(section.secrets)
    envs += [
        wire.EnvVar(name=k, value_from=wire.SecretRef(secret_name_ref=v))
        for k, v in sorted(refs.items())
    ]
    return envs


def _check_reserved(spec: JobSpec, names: list[str]) -> None:
    """Lepton answers 400 to an env it sets itself; say so before anything is sent."""
    for name in names:
        if name in RESERVED_ENV_NAMES:
            key = ("env", name) if name in spec.env else ("lepton", "env_vars", name)
            raise located_error(
                spec,
                key,
                f"{name} is reserved by Lepton (the platform sets it in every replica)",
                "use another name",
            )


def _check_uris(spec: JobSpec) -> None:
    """Data lives behind s3:// URIs; `lepton://` and friends are not storage."""
    for key, mapping in (("inputs", spec.inputs), ("outputs", spec.outputs)):
        for dest, source in mapping.items():
            uri = _uri(source)
            scheme = uri.split("://", 1)[0] if "://" in uri else ""
            if scheme and scheme != "s3":
                raise ConfigError(
                    f"'{uri}' uses {scheme}://, which is not S3-compatible storage",
                    file=spec.source,
                    key=f"{key}.{dest}",
                    fix=f"write s3://bucket/path (for example s3://{uri.split('://', 1)[1]})",
                )


def _uri(source: Any) -> str:
    """An input is a URI string or an object with `.uri` (the storage layer's Input)."""
    return str(getattr(source, "uri", source))


def _queue(section: LeptonSection) -> wire.QueueConfig | None:
    """queue_config as `lep job create` sends it: never without a priority_class."""
    if (
        section.priority_class is None
        and section.can_be_preempted is None
        and section.can_preempt is None
    ):
        return None
    return wire.QueueConfig(
        priority_class=section.priority_class or DEFAULT_PRIORITY_CLASS,
        can_be_preempted=section.can_be_preempted,
        can_preempt=section.can_preempt,
    )


def for_attempt(payload: dict[str, Any], job_id: str, attempt: int) -> dict[str, Any]:
    """The body of a resubmission: a new name and ANYLAUNCH_ATTEMPT, the rest unchanged."""
    body = copy.deepcopy(payload)
    base = body["metadata"]["id"].removesuffix(f"-{job_id}")
    body["metadata"]["id"] = job_name(base, job_id, attempt)
    body["metadata"].setdefault("labels", {})[LABEL_ATTEMPT] = str(attempt)
    for env in body["spec"]["envs"]:
        if env["name"] == "ANYLAUNCH_ATTEMPT":
            env["value"] = str(attempt)
    return body


def attempt_of(payload: LeptonPayload | dict[str, Any]) -> int:
    """The attempt a body is (its ANYLAUNCH_ATTEMPT: a controller's later attempt is sent
    as a new job); 1 when it says none."""
    for env in payload["spec"].get("envs") or []:
        if env.get("name") == "ANYLAUNCH_ATTEMPT" and str(env.get("value") or "").isdigit():
            return max(int(env["value"]), 1)
    return 1


def describe(plan: Plan[LeptonPayload]) -> str:
    body = plan.payload
    script = body["spec"]["container"]["command"][-1]
    shown = copy.deepcopy(body)
    shown["spec"]["container"]["command"][-1] = "<script below>"
    out = [
        f"# POST /jobs   (Lepton job {plan.name})",
        json.dumps(shown, indent=2),
        "# script:",
        script,
    ]
    if plan.secret_env:
        out.append(
            "# secrets created as workspace secrets at submit: " + ", ".join(plan.secret_env)
        )
    out += [f"# guess: {guess}" for guess in plan.guesses]
    return "\n".join(out)


def _guesses(payload: LeptonPayload, values: Mapping[str, Any]) -> list[str]:
    """What this plan took on trust rather than from the API."""
    out = []
    if values.get("guessed_mounts"):
        # A node group's volume says only nfs/local/remote (the SDK's VolumeFrom), not
        # which filesystem it is: lustre > filestore is read from the volume's name.
        source = values["mounts"][0].get("from")
        out.append(
            f"mounted {source}: chosen as the node group's fastest volume by its name"
            " (lustre > filestore > first); the API does not say a volume's filesystem"
            " — set lepton.mounts to choose"
        )
    pulls = payload["spec"].get("image_pull_secrets") or []
    if pulls and str(payload["spec"]["container"].get("image") or "").startswith("nvcr.io/"):
        # The official SDK only names pull secrets in a job; it has no call that makes
        # one, so the endpoint that makes it from NGC_KEY is a guess.
        out.append(
            f"image pull secret {pulls[-1]} is made from NGC_KEY (when set) if the workspace"
            " lacks it, through POST /imagepullsecrets, an endpoint the official leptonai"
            " SDK does not call (unverified); if that fails, create it in the dashboard"
            " (Settings > Registry)"
        )
    return out
