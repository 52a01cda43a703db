"""Slurm preflight: the pitfalls AutoModel's Slurm users meet, checked before submitting.

`spec_checks` only reads the job (instant, no cluster); `gpu_checks` asks sinfo whether
the partition has nodes with the GPUs the job asks for (one call, before every submit of
a GPU job); `cluster_checks` asks the cluster more: is the controller there, does the
partition exist, and — on the nodes themselves, not on the submitting host — do the
mount sources exist and is the master port free. Each check is ok / warn / fail with a
fix, in the contract's shape.
"""

from __future__ import annotations

import os
import shutil

from anylaunch.backends.checks import Check, Checks
from anylaunch.backends.slurm import commands, gres
from anylaunch.backends.slurm.cluster import login_of
from anylaunch.backends.slurm.config import SlurmSection, duration_seconds
from anylaunch.errors import BackendError
from anylaunch.jobfile.spec import JobSpec

# A job killed at its time limit loses what it did since its last checkpoint; leave at
# least 10 minutes after the last checkpoint write for it to finish and be written.
SAFE_MARGIN_S = 600


def spec_checks(spec: JobSpec) -> list[Check]:
    return _mounts_need_image(spec) + _time_checks(spec)


def _mounts_need_image(spec: JobSpec) -> list[Check]:
    # Mounts are Pyxis container mounts: without an image the job runs on the node itself
    # and they do nothing.
    s = spec.slurm or SlurmSection()
    if s.container_image or spec.image or not (s.extra_mounts or spec.mounts):
        return []
    return [
        Check(
            "mounts",
            "warn",
            "extra_mounts/mounts are set but there is no container_image: the job runs on"
            " the nodes themselves and the mounts are not made",
            "set slurm.container_image (or image:), or remove the mounts",
        )
    ]


def _time_checks(spec: JobSpec) -> list[Check]:
    s = spec.slurm or SlurmSection()
    if not s.time:
        return [Check("time_limit", "ok", "no time limit set: the partition's default applies")]
    limit = duration_seconds(s.time)
    out = Checks()
    if not s.signal:
        out.warn(
            "time_limit_signal",
            f"time {s.time} is set but no signal warns the job before the kill",
            "set slurm.signal: USR1 and checkpoint when it arrives",
        )
    elif s.signal_lead >= limit:
        out.warn(
            "time_limit_signal",
            f"signal_lead {s.signal_lead}s is not shorter than the time limit {limit}s:"
            f" {s.signal} arrives as soon as the job starts",
            "lower slurm.signal_lead or raise slurm.time",
        )
    write = s.checkpoint_write_time
    if s.signal and write is not None and s.signal_lead < write:
        out.warn(
            "checkpoint_before_kill",
            f"signal_lead {s.signal_lead}s is shorter than a checkpoint write"
            f" ({write}s): the checkpoint started on {s.signal} is killed half-written",
            f"set slurm.signal_lead to at least {write + 60}",
        )
    interval = spec.checkpoint.interval_minutes if spec.checkpoint else None
    if interval:
        left = limit % int(interval * 60) - (write or 0)
        if left < SAFE_MARGIN_S:
            out.warn(
                "time_after_last_checkpoint",
                f"time {s.time} leaves {max(left, 0)}s after the last periodic checkpoint"
                f" (every {interval:g} min): under {SAFE_MARGIN_S // 60} minutes",
                "shorten checkpoint.interval_minutes, extend slurm.time, or checkpoint on"
                f" {s.signal or 'USR1'}",
            )
    if not out:
        out.ok("time_limit", f"time {s.time}; {s.signal} {s.signal_lead}s before")
    return out


def cluster_checks(spec: JobSpec) -> list[Check]:
    """Probe the cluster (through its login node, for one reached over ssh); one srun on
    the job's nodes checks mounts and the master port."""
    s = spec.slurm or SlurmSection()
    via = login_of(spec)
    conf = os.environ.get("SLURM_CONF")
    if via is None and conf and not os.path.exists(conf):  # scontrol takes a minute to say so
        return [
            Check(
                "controller",
                "fail",
                f"SLURM_CONF={conf} does not exist",
                "point SLURM_CONF at the cluster's slurm.conf (devstack: source .devstack/env)",
            )
        ]
    if via is None and shutil.which("scontrol") is None:
        return [
            Check(
                "controller",
                "fail",
                "the Slurm client tools are not installed",
                "run anylaunch on a login node",
            )
        ]
    out = Checks()
    if via is not None:
        try:
            via.connect()
        except BackendError as exc:
            return [Check("login", "fail", exc.message, None)]
        out.ok("login", f"ssh to {via.text} logs in without a prompt")
    try:
        commands.run(["scontrol", "ping"], via=via)
    except BackendError as exc:
        return [*out, Check("controller", "fail", exc.message, "start slurmctld or set SLURM_CONF")]
    out.ok("controller", "slurmctld answers")
    if s.partition:
        argv = ["sinfo", "--noheader", "--partition", s.partition, "-o", "%P"]
        proc = commands.run(argv, via=via)
        if proc.stdout.strip():
            out.ok("partition", f"partition {s.partition} exists")
        else:
            out.fail("partition", f"no partition {s.partition}", "pick one of: sinfo -h -o %P")
            return out
    out += gpu_checks(spec)
    sources = [m.source for m in s.extra_mounts] + [m.source for m in spec.mounts]
    if s.nemo_mount:
        sources.append(s.nemo_mount.source)
    nodes = s.nodes or spec.nodes or 1
    probe = (
        'port=$1; shift; for p in "$@"; do [ -e "$p" ] || echo "missing $SLURMD_NODENAME $p"; done;'
        ' (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && echo "port $SLURMD_NODENAME $port";'
        " true"
    )
    argv = ["srun", f"--nodes={nodes}", "--ntasks-per-node=1", "--immediate=60"]
    argv += [f"--{k}={v}" for k, v in (("partition", s.partition), ("account", s.account)) if v]
    argv += ["bash", "-c", probe, "anylaunch-preflight", str(s.master_port), *sources]
    try:
        proc = commands.run(argv, via=via)
    except BackendError as exc:
        out.warn("nodes", f"could not run on the nodes: {exc.message}", None)
        return out
    missing = [
        line.split(" ", 2)[1:] for line in proc.stdout.splitlines() if line.startswith("missing ")
    ]
    busy = [line.split(" ")[1] for line in proc.stdout.splitlines() if line.startswith("port ")]
    for node, source in missing:
        out.fail(
            "mounts",
            f"mount source {source} is missing on node {node}",
            "create it on every node (or fix slurm.extra_mounts)",
        )
    if sources and not missing:
        out.ok("mounts", f"{len(sources)} mount source(s) exist on the nodes")
    if busy:
        out.warn(
            "master_port",
            f"port {s.master_port} is in use on {', '.join(sorted(set(busy)))}",
            "set slurm.master_port to a free port",
        )
    else:
        out.ok("master_port", f"port {s.master_port} is free on the nodes")
    return out


def gpu_checks(spec: JobSpec) -> list[Check]:
    """Whether the partition has enough nodes with the GPUs the job asks for each node.

    sbatch itself refuses a request no node could ever meet, with "Requested node
    configuration is not available"; this says which request and what the partition
    has, and warns when the nodes exist but are down or drained (the job would wait).
    """
    s = spec.slurm or SlurmSection()
    want = spec.per_node("slurm").gpus
    if not want:
        return []
    gpu_type = (gres.requested(s.gres) or (want, None))[1]
    try:
        proc = commands.run(["sinfo", "--noheader", "-o", gres.SINFO_FORMAT], via=login_of(spec))
    except BackendError as exc:
        return [Check("gpus", "warn", f"could not read the partition's GPUs: {exc.message}")]
    cap = gres.capacity(gres.node_groups(proc.stdout), s.partition, want, gpu_type)
    return judge(cap, s.partition, want, gpu_type, nodes=s.nodes or spec.nodes or 1)


def judge(
    cap: gres.Capacity, partition: str | None, want: int, gpu_type: str | None, nodes: int
) -> list[Check]:
    """The check for a job of `nodes` nodes asking `want` GPUs each, on a partition whose
    nodes `cap` counts: pure, so it is tested on recorded sinfo output."""
    out = Checks()
    what = f"{want} {gpu_type} GPUs" if gpu_type else f"{want} GPUs"
    if cap.partition is None:
        where = f"no partition {partition}" if partition else "no default partition"
        out.warn(
            "gpus",
            f"cannot check GPUs: sinfo shows {where}",
            "set slurm.partition (sinfo -h -o %P)",
        )
        return out
    name = f"partition {cap.partition}"
    if cap.fit >= nodes and cap.fit_usable >= nodes:
        out.ok("gpus", f"{name}: {cap.fit} of {cap.total} nodes have {what}")
    elif cap.fit >= nodes:
        out.warn(
            "gpus",
            f"{name}: only {cap.fit_usable} of the {cap.fit} nodes with {what} take jobs now"
            f" (the others are down or drained); the job waits until {nodes} do",
            "see why with sinfo -R, or lower nodes",
        )
    elif cap.largest == 0:
        out.fail(
            "gpus",
            f"{name} has no {gpu_type + ' ' if gpu_type else ''}GPUs (no gpu GRES on its"
            f" nodes): a job asking for {what} per node could never start",
            "choose a GPU partition (slurm.partition), or for ranks without GPUs write"
            " ranks_per_node instead of gpus_per_node",
        )
    elif cap.fit == 0:
        out.fail(
            "gpus",
            f"no node of {name} has {what} (the most is {cap.largest}): the job could never start",
            f"ask for at most {cap.largest} GPUs per node (gpus_per_node), or choose a"
            " partition with larger nodes (slurm.partition)",
        )
    else:
        out.fail(
            "gpus",
            f"only {cap.fit} of {name}'s nodes have {what}, and the job asks for {nodes}:"
            " it could never start",
            f"lower nodes to {cap.fit}, or ask for fewer GPUs per node",
        )
    return out
