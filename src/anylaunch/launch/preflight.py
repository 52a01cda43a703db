"""Preflight: checks before anything is submitted, each ok / warn / fail with a fix.

`anylaunch run` runs the quick ones (credentials, S3 paths, the backend's cheap checks)
and stops on a failure; `anylaunch preflight FILE` also runs the deep ones that probe
the cluster (a short srun on the job's nodes, the Lepton API). Backends contribute
checks through an optional `preflight(spec, deep)` method.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from anylaunch.backends.checks import Check, Checks
from anylaunch.errors import ConfigError, UsageError
from anylaunch.jobfile.loader import recipe_key_lookalikes
from anylaunch.jobfile.spec import Profile
from anylaunch.node import checkpoint, command
from anylaunch.storage import s3
from anylaunch.storage.credentials import check_readable

if TYPE_CHECKING:
    from anylaunch.backends.base import Backend
    from anylaunch.jobfile.spec import JobSpec
    from anylaunch.launch.resolve import Resolved


class PreflightFailed(UsageError):
    """At least one check failed; nothing was submitted."""

    code = "PREFLIGHT"

    def __init__(self, failed: list[Check]) -> None:
        self.failed = failed
        text = "; ".join(
            f"{c.name}: {c.message}" + (f" — {c.fix}" if c.fix else "") for c in failed
        )
        super().__init__(f"preflight failed: {text}")

    def to_json(self) -> dict:
        return {**super().to_json(), "checks": [c.to_json() for c in self.failed]}


_HF_HINTS = ("huggingface", "hf_hub", "hf://", "pretrained_model_name_or_path", "HF_HOME")


def run(
    resolved: Resolved, *, deep: bool = False, environ: Mapping[str, str] | None = None
) -> list[Check]:
    """Every check for this job on its backend, in a stable order."""
    spec = resolved.spec
    env = os.environ if environ is None else environ
    checks: list[Check] = []
    steps = (_command, _recipe_keys, _credentials, _hf_token, _storage, _image_python, _watchdog)
    for step in steps:
        checks += step(spec, resolved.impl, env)
    checks += _profiling(spec, resolved.impl.time_limit_s(spec))
    return checks + resolved.impl.preflight(spec, deep=deep)


def _command(spec: JobSpec, impl: Backend, env: Mapping[str, str]) -> list[Check]:
    if spec.command:
        return [Check("command", "ok", command.display(spec.command)[:80])]
    return [
        Check("command", "fail", "the job has no command", "add 'command:' or pass it after '--'")
    ]


def _watchdog(spec: JobSpec, impl: Backend, env: Mapping[str, str]) -> list[Check]:
    if spec.watchdog is None or impl.capabilities.watchdog:
        return []
    return [
        Check(
            "watchdog",
            "warn",
            f"the {impl.name} backend has no hang watchdog: this job runs without one",
            "watch it with anylaunch logs -f and anylaunch stack, or run it on local or Slurm",
        )
    ]


def _recipe_keys(spec: JobSpec, impl: Backend, env: Mapping[str, str]) -> list[Check]:
    # Top-level keys are the program's: a lookalike of a launcher key may be a typo, or a
    # real recipe key (AutoModel's diffusion recipes have `output:`). Never a refusal.
    return [
        Check(
            "recipe_keys",
            "warn",
            f"top-level '{key}' goes to the program's recipe, not to the launcher's '{ours}'",
            f"if you meant the launcher's key, rename it to '{ours}'",
        )
        for key, ours in recipe_key_lookalikes(spec)
    ]


def _credentials(spec: JobSpec, impl: Backend, env: Mapping[str, str]) -> list[Check]:
    out = Checks()
    for need in impl.credentials:
        given = [n for n in (need.name, *need.alternatives) if env.get(n)]
        if given:
            out.ok("credentials", f"{given[0]} is set")
        else:
            out.fail("credentials", f"{need.name} is not set", need.fix)
    return out


def _hf_token(spec: JobSpec, impl: Backend, env: Mapping[str, str]) -> list[Check]:
    text = json.dumps([spec.command, spec.recipe, sorted(spec.env)])
    if not any(hint.lower() in text.lower() for hint in _HF_HINTS):
        return []
    if env.get("HF_TOKEN") or spec.env.get("HF_TOKEN"):
        return [Check("hf_token", "ok", "HF_TOKEN is set")]
    return [
        Check(
            "hf_token",
            "warn",
            "the job uses Hugging Face but HF_TOKEN is not set: gated models fail with 401",
            "export HF_TOKEN=<token from huggingface.co/settings/tokens> and add HF_TOKEN: ${HF_TOKEN} to env",
        )
    ]


def _storage(spec: JobSpec, impl: Backend, env: Mapping[str, str]) -> list[Check]:
    if not spec.s3_uris():
        return []
    if not (env.get("ACCESS_KEY") and env.get("SECRET_KEY")) and not _aws_chain_has_credentials():
        return [
            Check(
                "s3_credentials",
                "fail",
                "no S3 credentials: ACCESS_KEY/SECRET_KEY are not set and the AWS chain has none",
                "export ACCESS_KEY=... SECRET_KEY=... (and S3_ENDPOINT_URL for a non-AWS server)",
            )
        ]
    try:
        check_readable(spec, env)
    except ConfigError as exc:
        return [Check("s3_paths", "fail", exc.what, exc.fix)]
    return [Check("s3_paths", "ok", f"{len(spec.s3_uris())} S3 location(s) readable")]


def _profiling(spec: JobSpec, limit_s: int | None) -> list[Check]:
    """nsys is for short runs; its overhead and reports are large."""
    profile = spec.profile or Profile()
    if not profile.enabled(spec):
        return []
    out = Checks()
    if profile.force:
        out.ok("profile_length", "profiling forced (profile.force)")
    elif limit_s is None:
        out.warn(
            "profile_length",
            "profiling with no time limit: nsys slows the job and writes large reports",
            f"keep the run under {profile.max_minutes:g} min (e.g. fewer steps), or set profile.force: true",
        )
    elif limit_s > profile.max_minutes * 60:
        out.fail(
            "profile_length",
            f"profiling a {limit_s / 60:g}-minute run: over profile.max_minutes ({profile.max_minutes:g})",
            "profile a short run (lower the time limit or the steps), or set profile.force: true",
        )
    else:
        out.ok("profile_length", f"profiled run of at most {limit_s / 60:g} min")
    return out


# Image families whose plain tags ship without python3 (OS bases, CUDA bases); their
# `*python*` variants have it.
_NO_PYTHON_IMAGES = (
    "ubuntu",
    "debian",
    "alpine",
    "busybox",
    "rockylinux",
    "almalinux",
    "centos",
    "nvidia/cuda",
    "nvcr.io/nvidia/cuda",
    "docker.io/library/ubuntu",
    "docker.io/library/debian",
    "docker.io/library/alpine",
)


def in_job_steps(spec: JobSpec, impl: Backend) -> list[str]:
    """anylaunch's own steps that run inside the job's image on this backend."""
    inside = impl.capabilities.steps_in_image
    if not spec.image:
        return []  # no container: the steps run on the node itself
    wanted = {
        "stage-in": bool(spec.inputs or spec.outputs),
        "resume": bool(checkpoint.checkpoint_dir(spec)),
    }
    return [step for step, needed in wanted.items() if needed and step in inside]


def _image_python(spec: JobSpec, impl: Backend, env: Mapping[str, str]) -> list[Check]:
    steps = in_job_steps(spec, impl)
    if not steps or not spec.image:
        return []
    repository = spec.image.split("@", 1)[0].rsplit(":", 1)[0].lower()
    if repository not in _NO_PYTHON_IMAGES or "python" in spec.image.lower():
        return [Check("image_python", "ok", f"{spec.image} runs the {'/'.join(steps)} step")]
    return [
        Check(
            "image_python",
            "warn",
            f"image {spec.image} usually has no python3; the {'/'.join(steps)} step needs"
            " python3 >= 3.8 (standard library only)",
            "use an image with python3 (e.g. nvcr.io/nvidia/pytorch:25.08-py3) or install it in yours",
        )
    ]


def _aws_chain_has_credentials() -> bool:
    return s3.has_credentials()
