"""Keep secret values off the page, whatever text they hide in.

The store and plans hold secrets by name only, but a program may print its token into
its log, and a diagnosis quotes log lines. The dashboard runs in the submitter's
environment, so it knows the values: every variable whose name looks like a secret, and
every variable a job's plan names as a secret, is masked in all text the server sends.
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterable, Mapping
from typing import Any

from markupsafe import escape

from anylaunch.jobfile.secrets import is_secret_name, mask, secret_values

# Secret variables by name, or by name with the value a job's text wrote literally.
Names = Iterable[str] | Mapping[str, str | None]


class Masker:
    """Masks the secret values of one environment (the server's, by default)."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = dict(os.environ if environ is None else environ)
        self._base = self._values(k for k in self._environ if is_secret_name(k))

    def _values(self, names: Names) -> set[str]:
        wanted = set(names)
        environ = {n: v for n, v in self._environ.items() if n in wanted}
        if isinstance(names, Mapping):  # a job's secrets, with the values its text wrote
            environ.update({n: v for n, v in names.items() if v})
        values = secret_values(wanted, environ)
        # A value with & < > " ' changes form when escaped: Jinja2 (markupsafe) and the
        # standard library spell quotes differently, so mask both spellings.
        return values | {html.escape(v) for v in values} | {str(escape(v)) for v in values}

    def secrets(self, secret_names: Names = ()) -> set[str]:
        return self._base | self._values(secret_names)

    def text(self, text: str, secret_names: Names = ()) -> str:
        return mask(text, self.secrets(secret_names))

    def data(self, value: Any, secret_names: Names = ()) -> Any:
        """A JSON-like structure with every string masked (spec, plan, diagnosis)."""
        secrets = self.secrets(secret_names)
        return _walk(value, secrets)


def _walk(value: Any, secrets: set[str]) -> Any:
    if isinstance(value, str):
        return mask(value, secrets)
    if isinstance(value, dict):
        return {_walk(k, secrets): _walk(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_walk(v, secrets) for v in value]
    return value
