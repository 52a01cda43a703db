"""`${VAR}`, `${VAR:-default}`, `${pin:KEY}` and `$$` in job files (R-A7e, R-L1).

Expansion happens once, at load time, so an unset variable is an error before anything
runs. A bare `$VAR` is left as written: shell code in commands stays shell code. Every
other `${...}` form belongs to the training program and is left exactly as written:
OmegaConf resolvers (`${oc.env:NAME,default}`), references to other recipe keys
(`${model.name}`) and `${NAME,default}` are resolved by the program when it reads its
recipe, not by the launcher.
Variables whose names look like secrets are tracked, so that the training program's copy
of the recipe keeps the `${VAR}` reference instead of the secret's value.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from anylaunch.redact import is_secret_name
from anylaunch.yamlsrc import KeyPath, Located

_TOKEN = re.compile(r"\$\$|\$\{([^}]*)\}|\$\{")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PIN = re.compile(r"pin:([A-Za-z0-9_.\-]+)")


@dataclass
class Expansion:
    """What expansion did: the new tree and the paths whose value came from a secret."""

    data: dict[str, Any]
    secret_refs: dict[KeyPath, str] = field(default_factory=dict)  # path -> original text


def expand(
    located: Located,
    environ: Mapping[str, str],
    pin: Callable[[str, KeyPath], str],
) -> Expansion:
    """Expand every string in the document; errors name the file, line and key."""
    result = Expansion(data={})

    def one(text: str, path: KeyPath) -> str:
        secret = False

        def replace(match: re.Match[str]) -> str:
            nonlocal secret
            whole, inner = match.group(0), match.group(1)
            if whole == "$$":
                return "$"
            if inner is None:
                raise located.error(
                    path, "unterminated '${'", "close it with '}' or write '$$' for a literal '$'"
                )
            pin_match = _PIN.fullmatch(inner)
            if pin_match:
                return pin(pin_match.group(1), path)
            name, sep, default = inner.partition(":-")
            if not _NAME.fullmatch(name):
                return whole  # the program's own reference: not ours to resolve
            value = environ.get(name)
            if value is None:
                if not sep:
                    raise located.error(
                        path,
                        f"environment variable {name} is not set",
                        f"export {name}=... before running, or write ${{{name}:-default}}",
                    )
                value = default
            elif is_secret_name(name):
                secret = True
            return value

        expanded = _TOKEN.sub(replace, text)
        if secret:
            result.secret_refs[path] = text
        return expanded

    def walk(value: Any, path: KeyPath) -> Any:
        if isinstance(value, dict):
            return {k: walk(v, (*path, k)) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, (*path, i)) for i, v in enumerate(value)]
        if isinstance(value, str) and "$" in value:
            return one(value, path)
        return value

    result.data = walk(located.data, ())
    return result
