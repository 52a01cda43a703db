"""`retry RUN --failed`, and the end of a run's submission a crash cut short.

Retrying rebuilds each failed split's spec from the store, where secrets are masked:
their values come from the environment again, by name, so a retry never needed them
written down.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from anylaunch.errors import UsageError
from anylaunch.jobfile.secrets import MASK
from anylaunch.jobfile.spec import JobSpec
from anylaunch.launch import splits as run_splits
from anylaunch.launch.resolve import resolve
from anylaunch.observe.runs import RunView
from anylaunch.store import Store


def retry_failed(
    view: RunView, store: Store | None = None, environ: Mapping[str, str] | None = None
) -> list[int]:
    """Resubmit the failed splits with their split ids; return those ids."""

    store = store or Store()
    failed = view.failed()
    if not failed:
        return []
    job = resolve(spec_of(view, failed[0], store, environ), view.backend, environ)
    run_splits.launch(job, failed, store=store, run_id=view.id)
    return failed


def resume_unsent(
    view: RunView, store: Store | None = None, environ: Mapping[str, str] | None = None
) -> list[int]:
    """Submit the splits a crashed `run` recorded but never handed to the backend (after
    asking the backend which it has: see `watch.reconcile`); return the ids submitted."""

    store = store or Store()
    todo = run_splits.unsent(view.id, store)
    if not todo:
        return []
    job = resolve(spec_of(view, todo[0].split_id or 0, store, environ), view.backend, environ)
    return run_splits.resume(view.id, job, store=store).submitted or []


def spec_of(
    view: RunView, split_id: int, store: Store, environ: Mapping[str, str] | None = None
) -> JobSpec:
    """The run's spec rebuilt from the store (with every split's value), secrets put back
    from the environment."""
    base = store.get(view.splits[split_id][-1].id).spec
    values = {
        i: store.get(a[-1].id).spec.get("env", {}).get(run_splits.VALUE_ENV)
        for i, a in view.splits.items()
    }
    per_attempt = (run_splits.SPLIT_ENV, run_splits.VALUE_ENV, "ANYLAUNCH_ATTEMPT")
    base["env"] = {k: v for k, v in base.get("env", {}).items() if k not in per_attempt}
    size = max(view.splits) + 1
    base["splits"] = [values.get(i) or "" for i in range(size)] if any(values.values()) else size
    return JobSpec.model_validate(unmask(base, os.environ if environ is None else environ))


def unmask(data: Any, environ: Mapping[str, str], key: str = "") -> Any:
    """Put secrets back from the environment where the store holds `***`."""
    if isinstance(data, dict):
        return {k: unmask(v, environ, k) for k, v in data.items()}
    if isinstance(data, list):
        return [unmask(v, environ, key) for v in data]
    if data == MASK:
        if key not in environ:
            raise UsageError(
                f"{key} was a secret of this run and is not set now — export {key}=... and retry"
            )
        return environ[key]
    return data
