"""Which code a job ran, as one line for people (`status`, the dashboard): the repository,
branch and commit of its folder at submit, whether it had uncommitted changes, and the
snapshot it ran from."""

from __future__ import annotations

from typing import Any


def line(source: dict[str, Any]) -> str:
    """`REPO BRANCH@COMMIT (dirty: ...); snapshot HASH (N files, B bytes)`."""
    parts = []
    if source.get("commit") or source.get("repo"):
        at = f"{source.get('branch') or 'detached'}@{(source.get('commit') or 'no commit')[:12]}"
        dirty = " (dirty: uncommitted changes)" if source.get("dirty") else ""
        parts.append(f"{source.get('repo') or ''} {at}{dirty}".strip())
    snapshot = source.get("snapshot")
    if snapshot:
        parts.append(
            f"snapshot {snapshot['sha256'].removeprefix('sha256:')[:16]}"
            f" ({snapshot['files']} files, {snapshot['bytes']:,} bytes)"
        )
    return "; ".join(parts)
