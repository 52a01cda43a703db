"""What rendering needs from the workspace: shape id, node group id, mounts.

Called from `prepare` only, and only for what the job file leaves open, so a file with
an explicit shape, no node group and explicit mounts renders without any API call.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from anylaunch.backends.lepton.config import LeptonSection
from anylaunch.backends.lepton.rest import wire
from anylaunch.errors import ConfigError
from anylaunch.jobfile.spec import JobSpec
from anylaunch.jobfile.yamlsrc import line_of

if TYPE_CHECKING:  # the client (httpx) is imported only when a call is made
    from collections.abc import Callable

    from anylaunch.backends.lepton.rest.client import LeptonClient

VOLUME_PREFERENCE = ("lustre", "filestore")
SHAPES_TTL_S = 60.0
# (workspace URL, node group) -> (monotonic time, shapes): the splits of a run each
# prepare, and without this 100 splits asked for the same shape list 100 times.
_shapes: dict[tuple[str, str | None], tuple[float, list[wire.Shape]]] = {}


def node_group_id(client: LeptonClient, spec: JobSpec, wanted: str) -> str:
    groups = client.node_groups()
    for group in groups:
        if wanted in (group.metadata.id, group.metadata.name):
            return group.metadata.id or wanted
    known = ", ".join(f"{g.metadata.name} ({g.metadata.id})" for g in groups) or "none"
    raise ConfigError(
        f"no node group '{wanted}' in this workspace",
        file=spec.source,
        key="lepton.dedicated_node_group",
        fix=f"use one of: {known}; or remove it to run on shared capacity",
    )


def shape(client: LeptonClient, spec: JobSpec, gpus: int, group: str | None) -> str:
    """The shape with `gpus` accelerators (the smallest CPU shape for 0); no such shape,
    or several, is an error that names the shapes there are."""
    shapes = _shapes_of(client, group)
    if gpus:
        found = [s for s in shapes if (s.spec.accelerator_num or 0) == gpus]
    else:
        found = sorted(
            (s for s in shapes if not s.spec.accelerator_num),
            key=lambda s: (s.spec.cpu or 0, s.spec.memory_in_mb or 0),
        )[:1]
    ids = sorted({s.shape_id for s in found})
    if len(ids) == 1:
        return ids[0]
    what = f"{gpus} GPUs" if gpus else "CPU only"
    where = "in this workspace" if group is None else f"on node group {group}"
    # Where the count was written: the neutral key, else the section's own.
    key = ("gpus_per_node",) if spec.gpus_per_node else ("lepton", "gpu_count")
    if not gpus:
        key = ("ranks_per_node",) if spec.ranks_per_node else ("lepton",)
    listed = ", ".join(_offered(shapes)) or "none"
    first = "ask for a GPU count a shape offers, or set" if gpus and not ids else "set"
    raise ConfigError(
        f"{'several shapes' if ids else 'no shape'} with {what} {where}",
        file=spec.source,
        line=line_of(spec.source, key),
        key=".".join(key),
        fix=f"{first} lepton.resource_shape to one of: {listed}",
    )


def _offered(shapes: list[wire.Shape]) -> list[str]:
    """`gpu.8xh100-sxm (8 GPUs)`, `cpu.small (CPU)`: each shape with what it offers."""
    return [
        f"{s.shape_id} ({f'{s.spec.accelerator_num} GPUs' if s.spec.accelerator_num else 'CPU'})"
        for s in sorted(shapes, key=lambda s: (s.spec.accelerator_num or 0, s.shape_id))
    ]


def _shapes_of(client: LeptonClient, group: str | None) -> list[wire.Shape]:
    """The workspace's shapes, asked at most once a minute per node group."""
    key = (client.credentials.url, group)
    now = time.monotonic()
    hit = _shapes.get(key)
    if hit is not None and now - hit[0] < SHAPES_TTL_S:
        return hit[1]
    shapes = client.shapes(group)
    _shapes[key] = (now, shapes)
    return shapes


def preferred_volume(volumes: list[wire.Volume]) -> wire.Volume | None:
    """lustre > filestore > the first one: the fastest shared filesystem the group has."""
    for word in VOLUME_PREFERENCE:
        for volume in volumes:
            if word in (volume.name or "").lower() or word in (volume.from_path or "").lower():
                return volume
    return volumes[0] if volumes else None


def mounts(
    connect: Callable[[], LeptonClient], spec: JobSpec, group: str | None
) -> list[dict[str, Any]]:
    """Explicit `lepton.mounts`, else the node group's preferred volume.

    Neutral `mounts: [source:dest]` become folders of that volume; without them the
    whole volume appears at its default mount path. `connect` is called only when the
    workspace must be asked.
    """
    section = spec.lepton or LeptonSection()
    if section.mounts is not None:
        return [m.model_dump(by_alias=True) for m in section.mounts]
    if not group:
        return []
    client = connect()
    volume = preferred_volume(client.node_group(group).spec.volumes)
    if volume is None:
        return []
    source = f"node-{volume.from_.lower()}:{volume.name}"
    if spec.mounts:
        return [{"path": m.source, "from": source, "mount_path": m.dest} for m in spec.mounts]
    target = volume.default_mount_path or f"/mnt/{volume.name}"
    # Mount what the workspace may use — the volume's first permitted prefix,
    # not its root (which storage permissions usually forbid).
    allowed = (
        [p.path_prefix for p in client.storage_permissions(volume.name or "", group)]
        if volume.name
        else []
    )
    return [
        {
            "path": allowed[0] if allowed else volume.from_path or "/",
            "from": source,
            "mount_path": target,
        }
    ]
