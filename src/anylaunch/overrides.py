"""`--set a.b=c`: override any key of a job file, typed like a YAML scalar."""

from __future__ import annotations

from typing import Any

import yaml

from anylaunch.errors import ConfigError
from anylaunch.yamlsrc import KeyPath, Located, Origin


def parse_override(text: str) -> tuple[KeyPath, Any]:
    """`slurm.nodes=2` -> (("slurm", "nodes"), 2); list items by index: `mounts.0.dest=/x`.

    Parts stay text; a part is read as a list index only where the tree holds a list.
    """
    key, sep, raw = text.partition("=")
    parts = key.strip().split(".")
    if not sep or not all(p.strip() for p in parts):
        raise ConfigError(
            f"'{text}' is not KEY=VALUE",
            file="--set",
            fix="write --set a.b=value, for example --set slurm.nodes=2",
        )
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw  # not a YAML scalar: keep the text as written
    return tuple(p.strip() for p in parts), value


def apply(located: Located, data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply overrides in order to an already expanded tree; the last one wins."""
    for text in overrides:
        path, value = parse_override(text)
        node: Any = data
        for depth, part in enumerate(path[:-1]):
            here = path[: depth + 1]
            if isinstance(node, list):
                node = _list_item(node, part, text)
            else:
                if part not in node:
                    located.origins[here] = Origin("--set", None)
                node = node.setdefault(part, {})
            if not isinstance(node, dict | list):  # a scalar (or null) cannot hold keys
                raise ConfigError(
                    f"cannot set below '{'.'.join(map(str, here))}', which is not a mapping",
                    file="--set",
                    key=text.partition("=")[0],
                    fix="set that key itself, or fix the path",
                )
        last = path[-1]
        if isinstance(node, list):
            _list_item(node, last, text)
            node[int(last)] = value
        else:
            node[last] = value
        located.origins[path] = Origin("--set", None)
    return data


def _list_item(items: list, part: str, text: str) -> Any:
    if not part.isdigit() or not int(part) < len(items):
        raise ConfigError(
            f"'{part}' is not an index of a list of {len(items)} items",
            file="--set",
            key=text.partition("=")[0],
            fix=f"use an index from 0 to {len(items) - 1}",
        )
    return items[int(part)]
