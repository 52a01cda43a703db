"""The pins file `versions.yaml`: named images and wheels a job file refers to.

A job file writes `image: ${pin:nemo}`; the pins file next to it (or the one named by
`$ANYLAUNCH_VERSIONS`) holds `nemo: nvcr.io/nvidia/nemo:25.09`. Pinning in one place
lets a team move every job to a new image with one edit.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from anylaunch.errors import ConfigError
from anylaunch.jobfile.yamlsrc import KeyPath, Located, parse

PINS_FILE = "versions.yaml"


class Pins:
    """Lazily loaded pins: the file is read only when a job file uses `${pin:...}`."""

    def __init__(self, job_file: Path, environ: Mapping[str, str]) -> None:
        override = environ.get("ANYLAUNCH_VERSIONS")
        self.path = Path(override) if override else job_file.parent / PINS_FILE
        self._values: dict[str, str] | None = None

    def _load(self) -> dict[str, str]:
        if self._values is None:
            try:
                text = self.path.read_text()
            except OSError as exc:
                raise ConfigError(
                    f"cannot read pins file ({exc.strerror})",
                    file=str(self.path),
                    fix=f"create {PINS_FILE} next to the job file or set ANYLAUNCH_VERSIONS",
                ) from None
            self._values = dict(_flatten(parse(text, str(self.path)).data))
        return self._values

    def resolve(self, key: str, path: KeyPath, job: Located) -> str:
        values = self._load()
        if key not in values:
            known = ", ".join(sorted(values)) or "none"
            raise job.error(path, f"pin '{key}' is not in {self.path}", f"use one of: {known}")
        return values[key]


def _flatten(data: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    """Nested pins are addressed with dots: `images: {nemo: x}` -> `images.nemo`."""
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _flatten(value, f"{name}.")
        elif value is not None and not isinstance(value, list):
            yield name, str(value)
