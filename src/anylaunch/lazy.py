"""Public names that a module exports without importing their home module at start-up.

`import anylaunch` and the CLI's `--help` must cost no more than Python's own start-up,
so a package's public names (the API, LeptonSDK, the workflow API) are imported from
their home module on first use, then kept in the package like any other attribute.
"""

from __future__ import annotations

import importlib
import sys

# Names for type checkers only: `typing` and `collections.abc` would cost the command
# that imports nothing else (a warm dry-run's client) more than all of its own work.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any


def lazy_exports(module: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The `__getattr__` of `module`: a name in `homes` (name -> home module) is imported
    on first use and stored in `module`; any other name is an AttributeError, as usual."""

    def load(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[module], name, value)
        return value

    return load
