"""YAML that remembers where each key came from.

Plain `yaml.safe_load` forgets line numbers, yet every config error must name
`FILE:LINE`. We compose the node tree (which carries marks), build plain Python values
from it, and keep a side table `KeyPath -> Origin` for error messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from anylaunch.errors import ConfigError

KeyPath = tuple[str | int, ...]

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
    values: int = 0  # built so far: aliases may expand a small file exponentially

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


def parse(text: str, file: str) -> Located:
    """Parse one YAML document whose top level must be a mapping."""
    try:
        node = yaml.compose(text, Loader=_Loader)
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


MAX_VALUES = 100_000  # far beyond any job file; a YAML alias bomb reaches it in a blink


def _build(node: yaml.Node, path: KeyPath, located: Located, ctor: Any) -> Any:
    located.values += 1
    if located.values > MAX_VALUES:
        raise ConfigError(
            f"the file expands to more than {MAX_VALUES} values",
            file=located.file,
            line=node.start_mark.line + 1,
            key=format_path(path),
            fix="YAML aliases (*name) that repeat each other multiply: write the values out",
        )
    if isinstance(node, yaml.MappingNode):
        ctor.flatten_mapping(node)  # resolves `<<: *anchor` merge keys
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
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
            key = str(key) if not isinstance(key, str) else key
            if key in out:
                first = located.origins[(*path, key)].line
                raise ConfigError(
                    f"duplicate key (first written on line {first})",
                    file=located.file,
                    line=line,
                    key=format_path((*path, key)),
                    fix="keep one of the two",
                )
            located.origins[(*path, key)] = Origin(located.file, line)
            out[key] = _build(value_node, (*path, key), located, ctor)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for index, item in enumerate(node.value):
            located.origins[(*path, index)] = Origin(located.file, item.start_mark.line + 1)
            items.append(_build(item, (*path, index), located, ctor))
        return items
    try:
        return ctor.construct_object(node, deep=True)
    except (ValueError, OverflowError) as exc:  # e.g. an int of more than 4300 digits
        raise ConfigError(
            f"cannot read value: {exc}",
            file=located.file,
            line=node.start_mark.line + 1,
            key=format_path(path),
            fix="write a smaller number, or quote it to make it text",
        ) from None
    except yaml.constructor.ConstructorError as exc:
        raise ConfigError(
            f"cannot read value: {exc.problem}",
            file=located.file,
            line=node.start_mark.line + 1,
            key=format_path(path),
            fix="write a plain scalar, list or mapping",
        ) from None
