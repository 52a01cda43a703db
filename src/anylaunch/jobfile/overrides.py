"""`--set a.b=c`: override any key of a job file, typed like a YAML scalar."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import yaml

from anylaunch.errors import ConfigError
from anylaunch.jobfile.yamlsrc import MAX_DEPTH, KeyPath, Located, Origin, parse_value


def parse_override(text: str) -> tuple[tuple[str, ...], Any]:
    """`slurm.nodes=2` -> (("slurm", "nodes"), 2); list items by index: `mounts.0.dest=/x`.

    Parts stay text; a part is read as a list index only where the tree holds a list.
    """
    key, sep, raw = text.partition("=")
    parts = tuple(p.strip() for p in key.strip().split("."))
    if not sep or not all(parts):
        raise ConfigError(
            f"'{text}' is not KEY=VALUE",
            file="--set",
            fix="write --set a.b=value, for example --set slurm.nodes=2",
        )
    if len(parts) > MAX_DEPTH:
        raise ConfigError(
            f"the key is {len(parts)} levels deep, over the {MAX_DEPTH} a job file may nest",
            file="--set",
            fix="set a key a few levels deep, as the job file writes it",
        )
    try:
        # Read within the job file's limits (depth, aliases): the value may come from an
        # agent's tool call as well as from a command line.
        value = parse_value(raw, "--set", parts) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw  # not a YAML scalar: keep the text as written
    return parts, value


def apply(
    located: Located,
    data: dict[Any, Any],
    overrides: list[str],
    fill: Callable[[Any, KeyPath], Any] = lambda value, path: value,
) -> dict[Any, Any]:
    """Apply overrides in order to an already expanded tree; the last one wins.

    `fill(value, path)` turns each new value into what is stored (expansion)."""
    for text in overrides:
        path, value = parse_override(text)
        node: Any = data
        here: KeyPath = ()
        for part in path[:-1]:
            if isinstance(node, list):
                node = _list_item(node, part, text)
                here = (*here, int(part))
            else:
                key = _key_in(node, part)
                here = (*here, key)
                if key not in node:
                    located.origins[here] = Origin("--set", None)
                node = node.setdefault(key, {})
            if not isinstance(node, dict | list):  # a scalar (or null) cannot hold keys
                raise ConfigError(
                    f"cannot set below '{'.'.join(map(str, here))}', which is not a mapping",
                    file="--set",
                    key=text.partition("=")[0],
                    fix="set that key itself, or fix the path",
                )
        last: Any = path[-1]
        if isinstance(node, list):
            _list_item(node, last, text)
            last = int(last)
        else:
            last = _key_in(node, last)
        at = (*here, last)
        located.origins[at] = Origin("--set", None)
        node[last] = fill(value, at)
    return data


def _key_in(mapping: dict[Any, Any], part: str) -> Any:
    """The key of `mapping` that `part` names: recipe keys keep YAML's types, so `0` on
    the command line finds a key written `0:` (an int) and `on` finds `on:` (a bool)."""
    if part in mapping:
        return part
    try:
        typed = parse_value(part, "--set", ())
    except (yaml.YAMLError, ConfigError):
        return part
    for key in mapping:
        if type(key) is type(typed) and key == typed:
            return key
    return part


def _list_item(items: list, part: str, text: str) -> Any:
    if not re.fullmatch(r"[0-9]{1,9}", part) or not int(part) < len(items):
        raise ConfigError(
            f"'{part}' is not an index of a list of {len(items)} items",
            file="--set",
            key=text.partition("=")[0],
            fix=f"use an index from 0 to {len(items) - 1}",
        )
    return items[int(part)]
