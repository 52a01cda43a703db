"""The shared-filesystem cache: `s3://bucket/key` lives at `<root>/bucket/key` (R-L11).

The seed's layout is kept so existing jobs find their data where they expect it. What
the seed lacks is validation (R-X5): each cached object has a record of the ETag and
size it was fetched from, so a changed object is refetched instead of served stale.
Records live apart from the data (`<root>/.anylaunch/meta/...`) so the data tree stays
exactly the bucket's tree. Files appear only complete: written to a temporary name,
renamed when done, under a per-object lock so concurrent jobs fetch an object once.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from anylaunch.storage.uri import S3Uri

META_DIR = ".anylaunch"


@dataclass(frozen=True)
class RemoteObject:
    """One object as S3 lists it: what a cached copy must match."""

    key: str
    etag: str
    size: int


class Cache:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def path(self, uri: S3Uri) -> Path:
        return self.root / uri.bucket / uri.key

    def _meta(self, bucket: str, key: str) -> Path:
        return self.root / META_DIR / "meta" / bucket / (key + ".json")

    def is_fresh(self, bucket: str, obj: RemoteObject) -> bool:
        """A metadata-only check: the record matches the listing and the file is whole."""
        data = self.root / bucket / obj.key
        try:
            record = json.loads(self._meta(bucket, obj.key).read_text())
            return (
                record.get("etag") == obj.etag
                and record.get("size") == obj.size
                and data.stat().st_size == obj.size
            )
        except (OSError, ValueError):
            return False

    def record(self, bucket: str, obj: RemoteObject) -> None:
        meta = self._meta(bucket, obj.key)
        meta.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(meta, json.dumps({"etag": obj.etag, "size": obj.size}))

    def forget(self, bucket: str, key: str) -> None:
        for path in (self.root / bucket / key, self._meta(bucket, key)):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def recorded_keys(self, bucket: str, prefix: str) -> Iterator[str]:
        """Keys under `prefix` that this cache fetched (files it may remove again)."""
        base = self.root / META_DIR / "meta" / bucket
        start = base / prefix
        top = start if start.is_dir() else start.parent
        if not top.exists():
            return
        for path in top.rglob("*.json"):
            key = str(path.relative_to(base))[: -len(".json")]
            if key.startswith(prefix):
                yield key

    def lock(self, bucket: str, key: str, *, wait: bool = True) -> ObjectLock | None:
        """Hold the right to fill one entry; None if `wait` is False and another holds it.

        The lock spans the whole download, so jobs filling the same cache fetch each
        object once: the others wait, then find it fresh.
        """
        path = self._meta(bucket, key).with_suffix(".lock")
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a")  # noqa: SIM115 - released by ObjectLock.release
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            handle.close()
            return None
        return ObjectLock(handle)


class ObjectLock:
    def __init__(self, handle: IO[str]) -> None:
        self._handle = handle

    def release(self) -> None:
        fcntl.flock(self._handle, fcntl.LOCK_UN)
        self._handle.close()

    def __enter__(self) -> ObjectLock:
        return self

    def __exit__(self, *_: object) -> None:
        self.release()


def temp_name(target: Path) -> Path:
    """A unique sibling of `target`: same filesystem, so the final rename is atomic."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    os.close(fd)
    return Path(name)


def atomic_write(target: Path, text: str) -> None:
    tmp = temp_name(target)
    tmp.write_text(text)
    os.replace(tmp, target)
