"""SkyPilot preflight: spot jobs must be able to come back after preemption.

AutoModel's spot advice, as checks: a preempted spot VM loses its disk, so a spot job
needs a checkpoint directory (on a bucket mount, which the task gets), a managed job to
relaunch it, and a checkpoint interval short enough that a preemption loses at most
`skypilot.max_lost_minutes` of work. `spec_checks` reads only the job; `deep_checks`
asks SkyPilot which clouds it can use.
"""

from __future__ import annotations

import importlib.util

from anylaunch.backends.checks import Check, Checks
from anylaunch.backends.skypilot.config import SkyPilotSection
from anylaunch.backends.skypilot.validate import INSTALL
from anylaunch.jobfile.spec import JobSpec
from anylaunch.node import checkpoint


def spec_checks(spec: JobSpec) -> list[Check]:
    section = spec.skypilot or SkyPilotSection()
    checks = [_library()]
    if section.use_spot:
        checks += _spot(spec, section)
    return checks


def deep_checks(spec: JobSpec) -> list[Check]:
    """Is the section's cloud enabled in SkyPilot (credentials, `sky check`)?"""
    section = spec.skypilot or SkyPilotSection()
    clouds = {c for c in [section.cloud, *(a.cloud for a in section.any_of)] if c}
    if not clouds or importlib.util.find_spec("sky") is None:
        return []
    from anylaunch.backends.skypilot.validate import sky

    module = sky()
    from sky.client import sdk as client  # enabled_clouds is not re-exported by `sky`

    try:
        enabled = {str(c).lower() for c in module.get(client.enabled_clouds())}
    except Exception as exc:
        return [
            Check("skypilot_api", "fail", f"SkyPilot's API server: {exc}", "run `sky api start`")
        ]
    missing = sorted(c for c in clouds if c not in enabled)
    if missing:
        return [
            Check(
                "skypilot_clouds",
                "fail",
                f"not enabled in SkyPilot: {', '.join(missing)}",
                f"set up credentials, then `sky check {' '.join(missing)}`",
            )
        ]
    return [Check("skypilot_clouds", "ok", f"enabled: {', '.join(sorted(clouds))}")]


def _library() -> Check:
    if importlib.util.find_spec("sky") is None:
        return Check("skypilot_library", "fail", "SkyPilot is not installed", INSTALL)
    return Check("skypilot_library", "ok", "SkyPilot is installed")


def _spot(spec: JobSpec, section: SkyPilotSection) -> list[Check]:
    out = Checks()
    folder = checkpoint.checkpoint_dir(spec)
    if folder is None:
        out.warn(
            "spot_checkpoint",
            "use_spot without a checkpoint location: a preemption restarts training from step 0",
            "add checkpoint.dir: /checkpoints (or the recipe's restore_from.path), and"
            " skypilot.checkpoint_bucket: s3://BUCKET/PREFIX to keep them",
        )
    else:
        where = section.checkpoint_bucket or "a bucket SkyPilot creates for the job"
        out.ok("spot_checkpoint", f"checkpoints in {folder}, mounted from {where}")
    if not section.is_managed:
        out.warn(
            "spot_recovery",
            "use_spot with managed: false: a preempted job is not relaunched",
            "remove skypilot.managed (spot jobs are managed jobs by default)",
        )
    out.append(_interval(spec, section))
    return out


def _interval(spec: JobSpec, section: SkyPilotSection) -> Check:
    minutes = checkpoint.interval_minutes(spec)
    budget = section.max_lost_minutes
    if minutes is not None:
        if minutes > budget:
            return Check(
                "spot_checkpoint_interval",
                "warn",
                f"a checkpoint every {minutes:g} min can lose {minutes:g} min of work per"
                f" preemption, more than skypilot.max_lost_minutes ({budget:g})",
                f"checkpoint at least every {budget:g} min (checkpoint.interval_minutes and the"
                " program's own interval), or raise skypilot.max_lost_minutes",
            )
        return Check(
            "spot_checkpoint_interval", "ok", f"every {minutes:g} min (budget {budget:g} min)"
        )
    steps = checkpoint.interval_steps(spec)
    if steps is not None:
        return Check(
            "spot_checkpoint_interval",
            "ok",
            f"every {steps} steps (step_scheduler.checkpoint_interval); add"
            f" checkpoint.interval_minutes to check it against the {budget:g} min budget",
        )
    return Check(
        "spot_checkpoint_interval",
        "warn",
        "use_spot without a checkpoint interval: how much work a preemption loses is unknown",
        "set step_scheduler.checkpoint_interval (steps) or checkpoint.interval_minutes"
        f" (at most {budget:g})",
    )
