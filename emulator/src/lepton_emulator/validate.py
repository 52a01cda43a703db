"""What a create request must satisfy (the SDK's rules, checked server-side: rules.py).

Each problem is a 400 with `{"code": "ValidationError", "message": ...}`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lepton_emulator import catalog, rules


class Invalid(Exception):
    pass


def check_job(body: Any, secret_exists: Callable[[str], bool]) -> None:
    if not isinstance(body, dict) or not isinstance(body.get("metadata"), dict):
        raise Invalid("body must be a LeptonJob object with 'metadata'")
    name = body["metadata"].get("id") or body["metadata"].get("name")
    if not isinstance(name, str) or not name:
        raise Invalid("metadata.id (the job name) is required")
    problem = rules.job_name_problem(name)
    if problem:
        raise Invalid(problem)
    labels = body["metadata"].get("labels") or {}
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise Invalid("metadata.labels must map strings to strings")
    for key in labels:
        problem = rules.label_key_problem(key)
        if problem:
            raise Invalid(problem)
    spec = body.get("spec") or {}
    if not isinstance(spec, dict):
        raise Invalid("spec must be an object")
    for key in ("completions", "parallelism"):
        value = spec.get(key, 1)
        if value is not None and (not _is_int(value) or value < 1):
            raise Invalid(f"spec.{key} must be a positive integer")
    for key in ("ttl_seconds_after_finished", "max_failure_retry", "max_job_failure_retry"):
        value = spec.get(key)
        if value is not None and (not _is_int(value) or value < 0):
            raise Invalid(f"spec.{key} must be an integer >= 0")
    container = spec.get("container") or {}
    if not isinstance(container, dict) or not isinstance(container.get("image"), str):
        raise Invalid("spec.container.image is required")
    if not container["image"].strip():
        raise Invalid("spec.container.image is required")
    command = container.get("command")
    if command is not None and (
        not isinstance(command, list) or not all(isinstance(a, str) for a in command)
    ):
        raise Invalid("spec.container.command must be a list of strings")
    shape = spec.get("resource_shape")
    if not isinstance(shape, str) or not shape:
        raise Invalid("spec.resource_shape is required")
    if catalog.shape(shape) is None:
        raise Invalid(f"unknown resource_shape '{shape}' (give the shape's metadata id)")
    affinity = spec.get("affinity") or {}
    if not isinstance(affinity, dict):
        raise Invalid("spec.affinity must be an object")
    groups = affinity.get("allowed_dedicated_node_groups") or []
    known = {g["metadata"]["id"] for g in catalog.node_groups("")}
    for group in groups:
        if group not in known:
            raise Invalid(f"unknown dedicated node group '{group}' (give its id)")
    _check_nodes(affinity.get("allowed_nodes_in_node_group"), groups)
    _check_queue(spec.get("queue_config"), groups)
    envs = spec.get("envs") or []
    if not isinstance(envs, list):
        raise Invalid("spec.envs must be a list")
    for env in envs:
        _check_env(env, secret_exists)
    mounts = spec.get("mounts") or []
    if not isinstance(mounts, list):
        raise Invalid("spec.mounts must be a list")
    for mount in mounts:
        _check_mount(mount)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_nodes(nodes: Any, groups: list[str]) -> None:
    """`allowed_nodes_in_node_group` (LeptonResourceAffinity: Optional[List[str]]): node
    ids, as the node group's node list names them, of the groups the job allows. The
    SDK's CLI checks each id against `GET /dedicated-node-groups/{id}/nodes` before it
    sends one and halts on an unknown id; what the server answers to one is not
    documented, so it is refused here (stricter than unverified)."""
    if nodes is None:
        return
    if not isinstance(nodes, list) or not all(isinstance(n, str) and n for n in nodes):
        raise Invalid("spec.affinity.allowed_nodes_in_node_group must be a list of node ids")
    if not nodes:  # the SDK's CLI never sends an empty list; its meaning is undocumented
        raise Invalid(
            "spec.affinity.allowed_nodes_in_node_group is empty: name at least one node,"
            " or leave it out to allow every node of the group"
        )
    if not groups:
        raise Invalid(
            "spec.affinity.allowed_nodes_in_node_group needs"
            " spec.affinity.allowed_dedicated_node_groups (nodes belong to a node group)"
        )
    known = {n["metadata"]["id"] for g in groups for n in catalog.nodes(g)}
    unknown = [n for n in nodes if n not in known]
    if unknown:
        raise Invalid(
            f"unknown node id(s) {', '.join(unknown)} in spec.affinity.allowed_nodes_in_node_group"
            f" (the nodes of {', '.join(groups)} are listed by GET /dedicated-node-groups/<id>/nodes)"
        )


def _check_queue(queue: Any, groups: list[str]) -> None:
    if queue is None:
        return
    if not isinstance(queue, dict):
        raise Invalid("spec.queue_config must be an object")
    if not groups:
        raise Invalid("spec.queue_config needs spec.affinity.allowed_dedicated_node_groups")
    priority = queue.get("priority_class")
    if priority not in rules.PRIORITY_CLASSES:
        raise Invalid(
            f"spec.queue_config.priority_class {priority!r} is not one of "
            + ", ".join(rules.PRIORITY_CLASSES)
        )
    for key in ("can_be_preempted", "can_preempt"):
        if queue.get(key) is not None and not isinstance(queue[key], bool):
            raise Invalid(f"spec.queue_config.{key} must be true or false")


def _check_env(env: Any, secret_exists: Callable[[str], bool]) -> None:
    if not isinstance(env, dict):
        raise Invalid("each env must be an object with a name")
    name = env.get("name")
    problem = rules.env_name_problem(name)
    if problem:
        raise Invalid(problem)
    value, source = env.get("value"), env.get("value_from")
    if value is not None and not isinstance(value, str):
        raise Invalid(f"env {name}: value must be a string (got {type(value).__name__})")
    if source is not None:
        ref = source.get("secret_name_ref") if isinstance(source, dict) else None
        if not isinstance(ref, str) or not ref:
            raise Invalid(f"env {name}: value_from needs secret_name_ref")
        if not secret_exists(ref):
            raise Invalid(f"env {name}: secret '{ref}' not found in the workspace")


def _check_mount(mount: Any) -> None:
    if not isinstance(mount, dict) or not isinstance(mount.get("mount_path"), str):
        raise Invalid("each mount needs mount_path")
    if rules.is_reserved_mount_path(mount["mount_path"]):
        raise Invalid(f"mount_path {mount['mount_path']} is a reserved system path")
    if not mount["mount_path"].startswith("/"):
        raise Invalid(f"mount_path {mount['mount_path']} must be absolute")
    if rules.climbs(mount["mount_path"]):
        raise Invalid(f"mount_path {mount['mount_path']} has a '..': give the path without it")
    source = mount.get("from")
    if not isinstance(source, str) or not source:
        raise Invalid(
            f"mount at {mount['mount_path']} needs 'from' (node-local or node-<type>:<volume>)"
        )
    path = mount.get("path")
    if path is not None and not isinstance(path, str):
        raise Invalid(f"mount at {mount['mount_path']}: path must be a string")
    if path is not None and rules.climbs(path):
        raise Invalid(
            f"mount at {mount['mount_path']}: path {path} has a '..', which would leave the"
            " volume's permitted folder: give the path without it"
        )
    if source == "node-local":
        return
    kind, _, volume = source.partition(":")
    if (
        kind not in ("node-nfs", "node-local", "node-remote")
        or volume not in catalog.volume_names()
    ):
        raise Invalid(f"mount from '{source}': no such volume in the workspace's node groups")
