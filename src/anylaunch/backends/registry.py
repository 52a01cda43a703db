"""Which backends exist: a name -> "module:Class", imported only when first used.

`--help` pays for no backend, and loading a job file imports only the backends whose
sections it has. This module imports nothing of anylaunch but its errors, so any layer
may ask it which backends there are (the job file's sections are named after them)
without an import circle. Adding a backend to anylaunch is one line in `_BUILT_IN`.
"""

from __future__ import annotations

import importlib
import os

from anylaunch.errors import UsageError

_BUILT_IN = {
    "local": "anylaunch.backends.local.backend:LocalBackend",
    "lepton": "anylaunch.backends.lepton.backend:LeptonBackend",
    "slurm": "anylaunch.backends.slurm.backend:SlurmBackend",
    "skypilot": "anylaunch.backends.skypilot.backend:SkyPilotBackend",
}
_REGISTERED: dict[str, str] = {}
# Where a job file with no backend section runs.
DEFAULT = "local"
# A backend that lives outside the package (a plugin, a test) is one entry in this
# variable instead: "name=module:Class", several separated by commas.
ENV_VAR = "ANYLAUNCH_BACKENDS"


def register(name: str, target: str) -> None:
    """Make a backend available as `name` in this process (`target`: "module:Class")."""
    _REGISTERED[name] = target


def names() -> list[str]:
    """Every backend that can be used: the built-in ones, then the registered ones."""
    return list(_targets())


def target(name: str) -> str:
    """The "module:Class" of the backend called `name`."""
    found = _targets().get(name)
    if found is None:
        raise UsageError(
            f"the {name} backend is not available in this version — use --backend local",
            code="BACKEND_UNAVAILABLE",
        )
    return found


def load(name: str) -> object:
    """The class registered as `name`, its module imported now."""
    module, _, cls = target(name).partition(":")
    return vars(importlib.import_module(module))[cls]


def _targets() -> dict[str, str]:
    found = {**_BUILT_IN, **_REGISTERED}
    for item in os.environ.get(ENV_VAR, "").split(","):
        name, sep, where = item.strip().partition("=")
        if not item.strip():
            continue
        if not (sep and name and ":" in where):
            raise UsageError(
                f"{ENV_VAR}: '{item.strip()}' is not name=module:Class"
                f" — fix it (e.g. toy=mypackage.backend:ToyBackend) or unset {ENV_VAR}"
            )
        found[name] = where
    return found
