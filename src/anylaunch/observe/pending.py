"""Why a job is pending, in plain words, and when to stop waiting.

Backends report their native reason ("pending: Resources", Lepton's Queueing, SkyPilot's
provisioning); this turns the ones people meet into what they mean and what to do.
A job queued longer than a threshold with no node is unlikely to get one soon: the
capacity it asks for is not there, so it is told to ask for something else.
"""

from __future__ import annotations

import os

# Slurm's pending reasons (squeue %r) that users meet most, in plain words.
SLURM_REASONS = {
    "Priority": "waiting behind jobs of higher priority",
    "Resources": "waiting for nodes to become free",
    "Dependency": "waiting for the jobs it depends on",
    "DependencyNeverSatisfied": "its dependency can never be met (a job it waits for failed) — cancel it",
    "JobHeldUser": "held by you — release it with scontrol release",
    "JobHeldAdmin": "held by an administrator",
    "BeginTime": "waiting for its start time",
    "ReqNodeNotAvail": "the nodes it asks for are down, drained or reserved",
    "PartitionTimeLimit": "its time limit exceeds the partition's — lower slurm.time",
    "PartitionNodeLimit": "it asks for more nodes than the partition allows — lower slurm.nodes",
    "QOSMaxWallDurationPerJobLimit": "its time limit exceeds the QOS's — lower slurm.time",
    "QOSMaxGRESPerUser": "you already use all the GPUs your QOS allows",
    "AssocGrpGRES": "your account's GPU quota is in use",
    "AssocMaxJobsLimit": "your account runs as many jobs as it may",
    "QOSMaxJobsPerUserLimit": "you run as many jobs as your QOS allows",
    "InvalidAccount": "the account is invalid — fix slurm.account",
    "InvalidQOS": "the QOS is invalid — fix slurm.qos",
    "launch failed requeued held": "its launch failed and Slurm held it — check the node, then scontrol release",
    "Reservation": "waiting for its reservation to start",
    "Licenses": "waiting for licenses",
}

STUCK_ADVICE = (
    "queued {minutes} min without a node: the capacity is not there — choose another resource shape or"
    " node group (lepton), partition or fewer nodes/GPUs (slurm), or another region/zone (skypilot)"
)


def threshold_s() -> float:
    try:
        return float(os.environ.get("ANYLAUNCH_PENDING_WARN_MIN", "15")) * 60
    except ValueError:
        return 15 * 60


def explain(detail: str | None, waited_s: float) -> str | None:
    """The pending detail in plain words, flagged once the job waited past the threshold."""
    text = detail
    if detail and detail.startswith("pending: "):
        reason = detail.removeprefix("pending: ").strip()
        words = SLURM_REASONS.get(reason)
        if words:
            text = f"pending ({reason}): {words}"
    if waited_s >= threshold_s():
        advice = STUCK_ADVICE.format(minutes=int(waited_s // 60))
        return f"{text}; {advice}" if text else advice
    return text
