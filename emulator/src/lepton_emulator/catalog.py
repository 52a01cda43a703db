"""The emulated workspace's fixed resources: node groups, nodes, volumes, shapes.

One dedicated H100 node group with a Lustre and a filestore volume, and a shared pool
(no node group) for jobs that name none. Shapes follow the SDK's VALID_SHAPES names.
"""

from __future__ import annotations

from typing import Any

GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"
NODE_GROUP_ID = "ng-h100-pool-7x2k"
NODE_GROUP_NAME = "h100-pool"
SHARED_POOL = "shared"
NODE_GPUS = 8  # GPUs of each node


def node_groups(workspace: str) -> list[dict[str, Any]]:
    return [
        {
            "metadata": {"id": NODE_GROUP_ID, "name": NODE_GROUP_NAME, "created_at": 1735689600000},
            "spec": {
                "workspaces": [workspace],
                "gpu_product": GPU_PRODUCT,
                "desired_nodes": 4,
                "allocation_mode": "static",
                "infini_band_enabled": True,
                "volumes": [
                    {
                        "from": "nfs",
                        "name": "filestore",
                        "size_in_gb": 2048,
                        "from_path": "/filestore",
                        "default_mount_path": "/mnt/filestore",
                    },
                    {
                        "from": "nfs",
                        "name": "lustre",
                        "size_in_gb": 102400,
                        "from_path": "/lustre",
                        "default_mount_path": "/mnt/lustre",
                    },
                ],
            },
            "status": {"ready_nodes": 4, "quota_enabled": True},
        }
    ]


def nodes(node_group_id: str) -> list[dict[str, Any]]:
    """Nodes of a group; the shared pool's nodes belong to no listed group."""
    prefix = "node-ip-10-50-111" if node_group_id == NODE_GROUP_ID else "shared-node-ip-10-60-7"
    return [
        {
            "metadata": {"id": f"{prefix}-{20 + i}", "name": f"{prefix}-{20 + i}"},
            "spec": {
                "unschedulable": False,
                "dedicated_node_group": node_group_id,
                "hostname": f"{prefix}-{20 + i}",
                "local_ip": f"10.50.111.{20 + i}",
                "resource": {
                    "cpu": {"type": "x86", "total": 224},
                    "gpu": {"product": GPU_PRODUCT, "allocated": 0, "total": NODE_GPUS},
                    "memory": {"total": 2048 * 1024},
                },
            },
            "status": {"status": ["Ready"], "machine_status": "running"},
        }
        for i in range(4)
    ]


def shapes() -> list[dict[str, Any]]:
    out = []
    for name, cpu, memory in (
        ("cpu.small", 1, 4096),
        ("cpu.medium", 2, 8192),
        ("cpu.large", 4, 16384),
    ):
        out.append(_shape(name, cpu, memory, None, 0))
    for count in (1, 2, 4, 8):
        prefix = "" if count == 1 else f"{count}x"
        out.append(
            _shape(
                f"gpu.{prefix}h100-sxm",
                24 * count,
                245760 * count,
                GPU_PRODUCT,
                count,
                display=f"H100 SXM x{count}",
            )
        )
    return out


def _shape(
    name: str, cpu: int, memory: int, accel: str | None, count: int, display: str | None = None
) -> dict[str, Any]:
    # A job names its shape by metadata id; the GPU shapes' spec names are display
    # names that differ from it, so a client that sends the spec name is refused.
    spec: dict[str, Any] = {
        "name": display or name,
        "description": f"{count} x {accel}" if accel else f"{cpu} CPU",
        "listable_in": ["job", "pod", "deployment"],
        "cpu": cpu,
        "memory_in_mb": memory,
        "ephemeral_storage_in_gb": 100 * max(count, 1),
    }
    if accel:
        spec.update(accelerator_type=accel, accelerator_num=count, accelerator_memory_in_mb=81559)
    return {"metadata": {"id": name, "name": name}, "spec": spec}


def shape(name: str) -> dict[str, Any] | None:
    return next((s for s in shapes() if s["metadata"]["id"] == name), None)


def storage_permissions(volume: str, node_group_id: str | None) -> list[dict[str, Any]]:
    if node_group_id not in (None, "", NODE_GROUP_ID):
        return []
    root = {"lustre": "/lustre", "filestore": "/filestore"}.get(volume)
    if root is None:
        return []
    return [
        {
            "path_prefix": f"{root}/fsw/portfolios/edgeai",
            "allowed_users": ["*"],
            "subfolder_policy": "",
            "nodegroup_id": NODE_GROUP_ID,
        },
        {
            "path_prefix": f"{root}/scratch",
            "allowed_users": ["*"],
            "subfolder_policy": "by_user",
            "nodegroup_id": NODE_GROUP_ID,
        },
    ]


def volume_from_path(volume: str) -> str:
    """Where the volume's tree starts in a mount's `path` (e.g. /lustre)."""
    for group in node_groups(""):
        for item in group["spec"]["volumes"]:
            if item["name"] == volume:
                return str(item.get("from_path") or "/").rstrip("/") or "/"
    return "/"


def volume_names() -> set[str]:
    return {v["name"] for g in node_groups("") for v in g["spec"]["volumes"]}


def workspace_info(workspace: str, jobs: int, secrets: int, pull_secrets: int) -> dict[str, Any]:
    return {
        "build_time": "2025-09-01T00:00:00Z",
        "git_commit": "emulator",
        "workspace_name": workspace,
        "workspace_tier": "enterprise",
        "workspace_state": "normal",
        "supported_shapes": {
            s["metadata"]["id"]: {
                k: s["spec"].get(k)
                for k in ("description", "cpu", "accelerator_type", "accelerator_num")
            }
            for s in shapes()
        },
        "workspace_disk_usage_bytes": 0,
        "workloads": {
            "num_deployments": 0,
            "num_jobs": jobs,
            "num_pods": 0,
            "num_secrets": secrets,
            "num_image_pull_secrets": pull_secrets,
        },
        "resource_quota": {
            "limit": {"cpu": 1024, "memory": 8388608, "accelerator_num": 64},
            "used": {"cpu": 0, "memory": 0, "accelerator_num": 0},
        },
        "dedicated_node_group_only": False,
    }
