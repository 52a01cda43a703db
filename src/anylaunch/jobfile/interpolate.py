"""`${VAR}`, `${VAR:-default}`, `${pin:KEY}` and `$$` in job files.

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

from anylaunch.jobfile.secrets import is_secret_name
from anylaunch.jobfile.yamlsrc import KeyPath, Located

_TOKEN = re.compile(r"\$\$|\$\{([^}]*)\}|\$\{")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PIN = re.compile(r"pin:([A-Za-z0-9_.\-]+)")


# The program's own forms that read a variable from the job's environment
# (`${oc.env:NAME}`, `${oc.env:NAME,default}`, `${NAME,default}`): a secret named there
# must reach the job too, as a secret.
_PROGRAM_ENV = re.compile(r"(?:oc\.env:)?\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:,.*)?", re.DOTALL)


@dataclass
class Expansion:
    """What expansion did: the new tree, the paths whose value came from a secret, and the
    secret variables that the text names (which must travel to the job as secrets)."""

    data: dict[str, Any]
    secret_refs: dict[KeyPath, str] = field(default_factory=dict)  # path -> original text
    secret_names: dict[KeyPath, set[str]] = field(default_factory=dict)  # path -> names


class Expander:
    """Expands strings of one document; errors name the file, line and key."""

    def __init__(
        self,
        located: Located,
        environ: Mapping[str, str],
        pin: Callable[[str, KeyPath], str],
    ) -> None:
        self.located = located
        self.environ = environ
        self.pin = pin
        self.result = Expansion(data={})

    def walk(self, value: Any, path: KeyPath) -> Any:
        if isinstance(value, dict):
            return {k: self.walk(v, (*path, k)) for k, v in value.items()}
        if isinstance(value, list):
            return [self.walk(v, (*path, i)) for i, v in enumerate(value)]
        if isinstance(value, str) and "$" in value:
            return self.one(value, path)
        return value

    def one(self, text: str, path: KeyPath) -> str:
        located, environ = self.located, self.environ
        secret = False
        names: set[str] = set()

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
                return self.pin(pin_match.group(1), path)
            name, sep, default = inner.partition(":-")
            if not _NAME.fullmatch(name):
                program = _PROGRAM_ENV.fullmatch(inner)
                if program and is_secret_name(program.group(1)) and program.group(1) in environ:
                    names.add(program.group(1))
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
                names.add(name)
            return value

        expanded = _TOKEN.sub(replace, text)
        if secret:
            self.result.secret_refs[path] = text
        if names:
            self.result.secret_names[path] = names
        return expanded


def expand(
    located: Located,
    environ: Mapping[str, str],
    pin: Callable[[str, KeyPath], str],
) -> Expansion:
    """Expand every string in the document; errors name the file, line and key."""
    expander = Expander(located, environ, pin)
    expander.result.data = expander.walk(located.data, ())
    return expander.result
