"""Resolve: the one place a job meets its backend before anything is rendered.

Routing (which backend), the limits (the common ones and the backend's own), whether the
backend can start the job's launcher, and the storage settings the job needs are decided
here, once per submission, into a `Resolved` that the later stages take: preflight,
render, record and send never route or look up settings again.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from anylaunch.backends import registry
from anylaunch.backends.base import Backend, get_backend
from anylaunch.backends.section import Sized
from anylaunch.errors import ConfigError
from anylaunch.jobfile import limits
from anylaunch.jobfile.loader import did_you_mean
from anylaunch.jobfile.spec import JobSpec
from anylaunch.jobfile.yamlsrc import KeyPath, format_path, line_of
from anylaunch.storage.credentials import with_job_env


@dataclass(frozen=True)
class Resolved:
    """A job ready to render: its spec with the storage settings it needs, and the
    backend that runs it."""

    spec: JobSpec
    impl: Backend
    nodes: int
    ranks: int  # per node

    @property
    def backend(self) -> str:
        return self.impl.name


def resolve(
    spec: JobSpec,
    backend: str | Backend | None = None,
    environ: Mapping[str, str] | None = None,
) -> Resolved:
    """Route `spec` (to `backend`: a name, a backend already built with its own
    credentials, or None for the file's own section) and check it fits there."""
    impl = backend if isinstance(backend, Backend) else get_backend(route(spec, backend))
    nodes, ranks, key = job_size(spec, impl.name)
    _check_fits(spec, impl, nodes, ranks, key)
    _check_runnable(spec, impl)
    return Resolved(with_storage_env(spec, environ), impl, nodes, ranks)


def route(spec: JobSpec, backend: str | None = None) -> str:
    """Which backend runs this spec: `--backend`, else the one section, else local."""
    if backend is not None:
        known = registry.names()
        if backend not in known:
            raise ConfigError(
                f"unknown backend '{backend}'",
                file="--backend",
                fix=f"use one of: {', '.join(known)}{did_you_mean(backend, known)}",
            )
        return backend
    present = spec.sections()
    if len(present) > 1:
        raise ConfigError(
            f"sections for several backends ({', '.join(present)})",
            file=spec.source,
            fix=f"pick one with --backend {present[0]} (or {', '.join(present[1:])})",
        )
    return present[0] if present else registry.DEFAULT


def job_size(spec: JobSpec, backend: str) -> tuple[int, int, KeyPath]:
    """(nodes, ranks per node, where the node count is written) of a spec on a backend."""
    # A backend whose section does not write the size reads only the neutral keys.
    section = spec.section(backend)
    sized = section if isinstance(section, Sized) else None
    node_word = sized.size_keys[0] if sized else "nodes"
    nodes = spec.nodes or (sized.size(node_word) if sized else None)
    key: KeyPath = ("nodes",) if spec.nodes or not nodes else (backend, node_word)
    return nodes or 1, spec.per_node(backend).ranks, key


def with_storage_env(spec: JobSpec, environ: Mapping[str, str] | None = None) -> JobSpec:
    """The spec plus the S3 settings its job needs (as secrets where they are)."""
    if not spec.s3_uris():
        return spec
    return with_job_env(spec, os.environ if environ is None else environ)


def _check_fits(spec: JobSpec, impl: Backend, nodes: int, ranks: int, key: KeyPath) -> None:
    splits = spec.splits if isinstance(spec.splits, int) else len(spec.splits or [])
    for where, count, most, holder in (
        (key, nodes, limits.MAX_NODES, f"any {impl.name} job can get"),
        (("splits",), splits, limits.MAX_SPLITS, "one run may have"),
    ):
        if count > most:
            noun = where[-1] if where[-1] in ("nodes", "splits") else "nodes"
            raise _error(spec, where, f"{count} {noun} is more than {holder} (at most {most})",
                         f"check the number of {noun}")  # fmt: skip
    refusal = impl.too_big(spec, nodes, ranks)
    if refusal is not None:
        raise _error(spec, key, *refusal)


def _check_runnable(spec: JobSpec, impl: Backend) -> None:
    """What every backend needs before rendering: a command, and a launcher it runs."""
    if not spec.command:
        raise _error(
            spec, ("command",), "no command to run",
            "add 'command:' to the job file or pass it after '--'",
        )  # fmt: skip
    launchers = impl.capabilities.launchers
    if spec.launcher not in launchers:
        others = [name for name in registry.names() if _starts(name, spec.launcher)]
        elsewhere = f", or --backend {' / '.join(others)}" if others else ""
        raise _error(
            spec,
            ("launcher",),
            f"launcher '{spec.launcher}' is not one the {impl.name} backend starts"
            f" ({', '.join(sorted(launchers))})",
            "use launcher: torchrun (or none for a command that spawns its own ranks)" + elsewhere,
        )
    if spec.snapshot and spec.snapshot.enabled and not impl.capabilities.snapshot:
        raise _error(
            spec,
            ("snapshot",),
            f"the {impl.name} backend runs what its image holds, not a folder of this"
            " machine: it cannot run from a snapshot",
            "put the code into the image (or its inputs), or remove snapshot:",
        )


def _starts(backend: str, launcher: str) -> bool:
    """Whether `backend` starts ranks with `launcher` (imports it: an error's path only)."""
    try:
        return launcher in get_backend(backend).capabilities.launchers
    except Exception:  # a registered backend that does not load cannot be suggested
        return False


def _error(spec: JobSpec, key: KeyPath, what: str, fix: str) -> ConfigError:
    """A ConfigError about the job file's `key`, at the line it is written on."""
    line = line_of(spec.source, key) if spec.source else None
    return ConfigError(what, file=spec.source, line=line, key=format_path(key), fix=fix)
