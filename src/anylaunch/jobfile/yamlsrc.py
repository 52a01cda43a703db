"""YAML that remembers where each key came from.

Plain `yaml.safe_load` forgets line numbers, yet every config error must name
`FILE:LINE`. We compose the node tree (which carries marks), build plain Python values
from it, and keep a side table `KeyPath -> Origin` for error messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from anylaunch.errors import ConfigError

# Recipe mappings keep YAML's own key types (`0:` is an int, `on:` a bool), so that the
# program reads back what the user wrote; a list index is an int too.
KeyPath = tuple[str | int | float, ...]

try:  # libyaml is much faster when present; the pure-Python loader behaves the same
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    _Loader = yaml.SafeLoader


def format_path(path: KeyPath) -> str:
    """`("slurm", "extra_mounts", 0, "source")` -> `slurm.extra_mounts[0].source`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


@dataclass(frozen=True)
class Origin:
    """Where a value was written: a file and line, or a `--set` override."""

    file: str
    line: int | None = None


@dataclass
class Located:
    """A parsed YAML document plus the origin of every key and list item in it."""

    data: dict[str, Any]
    file: str
    origins: dict[KeyPath, Origin] = field(default_factory=dict)
    # Values built by expanding aliases: a small file may expand exponentially. Values
    # written out in the text are bounded by the file's size and are not counted here.
    alias_values: int = 0
    built: set[int] = field(default_factory=set)  # ids of nodes built at least once
    merged: dict[int, int] = field(default_factory=dict)  # mapping node id -> merged pairs
    open_nodes: set[int] = field(default_factory=set)  # ids of the nodes being built now

    def origin(self, path: KeyPath) -> Origin:
        """The origin of `path`, or of its nearest ancestor that has one."""
        for end in range(len(path), 0, -1):
            found = self.origins.get(tuple(path[:end]))
            if found is not None:
                return found
        return Origin(self.file, None)

    def error(self, path: KeyPath, what: str, fix: str | None = None) -> ConfigError:
        where = self.origin(path)
        return ConfigError(what, file=where.file, line=where.line, key=format_path(path), fix=fix)


def line_of(source: str | None, path: KeyPath) -> int | None:
    """The job file's line for `path` (or its nearest ancestor), for errors found after
    loading (the spec keeps no lines), so the file is read again."""
    if not source:
        return None
    try:
        located = parse(Path(source).read_text(encoding="utf-8"), source)
    except (OSError, ConfigError):
        return None
    return located.origin(path).line


def parse(text: str, file: str) -> Located:
    """Parse one YAML document whose top level must be a mapping."""
    node = _compose(text, file)
    located = Located(data={}, file=file)
    if node is None:
        return located
    if not isinstance(node, yaml.MappingNode):
        raise ConfigError(
            "the top level must be a mapping of keys",
            file=file,
            line=node.start_mark.line + 1,
            fix="start the file with keys such as 'command:' and 'nodes:'",
        )
    located.data = _build(node, (), located, yaml.constructor.SafeConstructor())
    return located


def parse_value(text: str, file: str, path: KeyPath) -> Any:
    """One value written on its own (a `--set` value), read as YAML within the same
    limits as a job file's values, for the key at `path`. Text that is not YAML raises
    `yaml.YAMLError` (the caller keeps it as written)."""
    try:
        node = yaml.compose(text, Loader=_Loader)
    except RecursionError:
        raise _too_deep(file, None, path) from None
    if node is None:
        return None
    try:
        return _build(node, path, Located(data={}, file=file), yaml.constructor.SafeConstructor())
    except UnknownTag as exc:
        raise yaml.YAMLError(exc.message) from None


def _compose(text: str, file: str) -> yaml.Node | None:
    """The node tree of `text`; its errors as one line naming the line."""
    try:
        return yaml.compose(text, Loader=_Loader)
    except RecursionError:  # the pure-Python composer recurses once per level
        raise _too_deep(file, None, ()) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        problem = exc.problem or exc.context or "cannot be parsed"
        raise ConfigError(
            f"invalid YAML: {problem}",
            file=file,
            line=line,
            fix="fix the syntax (indentation, quotes, a missing ':')",
        ) from None
    except yaml.YAMLError as exc:  # reader errors: bad bytes, and the like
        raise ConfigError(
            f"invalid YAML: {exc}", file=file, fix="save the file as UTF-8 text"
        ) from None


MAX_ALIAS_VALUES = 100_000  # far beyond any job file; a YAML alias bomb reaches it in a blink
# Levels of mappings and lists one inside another. Recipes nest a handful; each level
# costs every walker of the tree (this builder, expansion, validation, JSON) a few
# frames of Python's stack, which holds about a thousand.
MAX_DEPTH = 100
_MERGE_TAG = "tag:yaml.org,2002:merge"


def _too_deep(file: str, line: int | None, path: KeyPath) -> ConfigError:
    return ConfigError(
        f"values are nested more than {MAX_DEPTH} levels deep",
        file=file,
        line=line,
        key=format_path(path[:MAX_DEPTH]) or None,
        fix="a job file holds settings a few levels deep: give deeper data to the program as a file",
    )


def _build(
    node: yaml.Node, path: KeyPath, located: Located, ctor: Any, aliased: bool = False
) -> Any:
    if len(path) > MAX_DEPTH:
        raise _too_deep(located.file, node.start_mark.line + 1, path)
    aliased = aliased or id(node) in located.built
    located.built.add(id(node))
    if aliased:
        located.alias_values += 1
        if located.alias_values > MAX_ALIAS_VALUES:
            raise ConfigError(
                f"YAML aliases expand to more than {MAX_ALIAS_VALUES} values",
                file=located.file,
                line=node.start_mark.line + 1,
                key=format_path(path),
                fix="aliases (*name) that repeat each other multiply: write the values out",
            )
    if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
        if id(node) in located.open_nodes:
            raise ConfigError(
                "an alias refers to the value that contains it",
                file=located.file,
                line=node.start_mark.line + 1,
                key=format_path(path),
                fix="a value cannot hold itself: write it out",
            )
        located.open_nodes.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return _build_mapping(node, path, located, ctor, aliased)
            return _build_sequence(node, path, located, ctor, aliased)
        finally:
            located.open_nodes.discard(id(node))
    try:
        return ctor.construct_object(node, deep=True)
    except (ValueError, OverflowError) as exc:  # e.g. an int of more than 4300 digits
        why, fix, kind = (
            str(exc),
            "write a smaller number, or quote it to make it text",
            ConfigError,
        )
    except yaml.constructor.ConstructorError as exc:
        why, fix, kind = str(exc.problem), "write a plain scalar, list or mapping", UnknownTag
    raise kind(
        f"cannot read value: {why}",
        file=located.file,
        line=node.start_mark.line + 1,
        key=format_path(path),
        fix=fix,
    )


class UnknownTag(ConfigError):
    """A value with a tag the safe loader does not construct (`!!python/object`, `!x`)."""


def _build_sequence(
    node: yaml.SequenceNode, path: KeyPath, located: Located, ctor: Any, aliased: bool
) -> list[Any]:
    items = []
    for index, item in enumerate(node.value):
        at = (*path, index)
        located.origins[at] = Origin(located.file, item.start_mark.line + 1)
        items.append(_build(item, at, located, ctor, aliased))
    return items


def _build_mapping(
    node: yaml.MappingNode, path: KeyPath, located: Located, ctor: Any, aliased: bool
) -> dict[Any, Any]:
    if id(node) not in located.merged:
        explicit = sum(1 for key_node, _ in node.value if key_node.tag != _MERGE_TAG)
        # `<<: *anchor` merge keys: PyYAML puts the merged pairs first, in the order in
        # which a later pair wins, and the mapping's own pairs after them.
        ctor.flatten_mapping(node)
        located.merged[id(node)] = len(node.value) - explicit
    merged = located.merged[id(node)]
    out: dict[Any, Any] = {}
    written: set[Any] = set()  # keys written in this mapping itself (not merged in)
    for index, (key_node, value_node) in enumerate(node.value):
        key = ctor.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if not isinstance(key, str | int | float | bool) or key is None:
            raise ConfigError(
                "a mapping key must be a plain word",
                file=located.file,
                line=line,
                key=format_path(path),
                fix="write keys as plain text",
            )
        at = (*path, key)
        if index >= merged:
            if key in written:
                first = located.origins[at].line
                raise ConfigError(
                    f"duplicate key (first written on line {first})",
                    file=located.file,
                    line=line,
                    key=format_path(at),
                    fix="keep one of the two",
                )
            written.add(key)
        # As in PyYAML: a later pair wins and the key keeps its first place.
        located.origins[at] = Origin(located.file, line)
        if isinstance(key, bool) and isinstance(key_node.value, str):
            # `on:` reads as true; an error about it may name the key as it was written.
            as_written = (*path, key_node.value)
            located.origins[as_written] = located.origins[at]
        out[key] = _build(value_node, at, located, ctor, aliased)
    return out


def text_keys(value: Any) -> Any:
    """The same tree with every mapping key as text, for launcher-owned sections."""
    if isinstance(value, dict):
        return {_key_text(k): text_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [text_keys(v) for v in value]
    return value


def on_key(data: Any) -> Any:
    """A mapping whose key `on:` YAML 1.1 read as true (and `text_keys` wrote back as
    "true") with `on` as its key again, for the models that have a field `on`."""
    if isinstance(data, dict) and "true" in data and "on" not in data:
        return {("on" if k == "true" else k): v for k, v in data.items()}
    return data


def _key_text(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    return key if isinstance(key, str) else str(key)
