"""The validated shared-filesystem cache: `s3://bucket/key` lives at `<root>/bucket/key`.

The bucket's own tree (TAO's layout). Each cached object has a record of the ETag and
size it was fetched from, kept apart under `<root>/.anylaunch/meta/`, so a warm cache is
checked without reading a byte and a changed object is refetched. Files appear only
complete (written to a temporary name, renamed when done), under a per-object lock so
concurrent jobs fetch an object once.

Path safety: a key is a name chosen by whoever writes the bucket, and becomes a path
here. A `..` part would put the file outside its folder (`data/../../../../tmp/x`
outside the cache altogether) and a `.` part would make two keys one file, so a key
with either is refused (`key_problem`), here and, for the URIs of a job file, when the
job file is read.
"""

from __future__ import annotations

import fcntl
import json
import os

TYPE_CHECKING = False  # typing's own flag, without importing typing at start
if TYPE_CHECKING:
    from typing import IO, Any, Iterator

META_DIR = ".anylaunch"


class StageError(Exception):
    """An input or output that cannot be staged; the message says which and why."""


def key_problem(key: str) -> str | None:
    """Why `key` cannot name a file below its folder, or None when it can.

    Empty parts (`a//b`, a leading `/`) are not refused: as in any file system path,
    they add nothing.
    """
    parts = key.split("/")
    if ".." in parts:
        return "a '..' part in the key would put the file outside its folder"
    if "." in parts:
        return "a '.' part in the key would make it the file of another key"
    return None


def key_parts(bucket: str, key: str) -> list[str]:
    """The folders and file name of `s3://bucket/key` below the cache root; StageError
    for a key (or bucket) that is not a plain path below its folder."""
    problem = key_problem(key)
    if bucket in ("", ".", "..") or "/" in bucket:
        problem = "not a bucket name"
    if problem:
        raise StageError(f"s3://{bucket}/{key}: {problem} — not staged; rename the object")
    return [bucket, *(part for part in key.split("/") if part)]


def normal_key(key: str) -> str:
    """The key as its path spells it: the one key of each cached file."""
    return "/".join(part for part in key.split("/") if part)


def temp_name(target: str) -> str:
    """A new, unique sibling of `target`: same filesystem, so the final rename is atomic."""
    folder, name = os.path.split(target)
    os.makedirs(folder or ".", exist_ok=True)
    while True:
        tmp = os.path.join(folder, f".{name}.{os.urandom(6).hex()}.part")
        try:
            os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            return tmp
        except FileExistsError:
            continue


def atomic_write(target: str, text: str) -> None:
    tmp = temp_name(target)
    with open(tmp, "w") as handle:
        handle.write(text)
    os.replace(tmp, target)


class Cache:
    def __init__(self, root: str) -> None:
        self.root = root

    def path(self, bucket: str, key: str) -> str:
        return os.path.join(self.root, *key_parts(bucket, key))

    def _meta(self, bucket: str, key: str) -> str:
        return os.path.join(self.root, META_DIR, "meta", *key_parts(bucket, key)) + ".json"

    def is_fresh(self, bucket: str, key: str, etag: str, size: int) -> bool:
        """A metadata-only check: the record matches the listing and the file is whole."""
        try:
            with open(self._meta(bucket, key)) as handle:
                record = json.load(handle)
            return (
                record.get("etag") == etag
                and record.get("size") == size
                and os.stat(self.path(bucket, key)).st_size == size
            )
        except (OSError, ValueError):
            return False

    def record(self, bucket: str, key: str, etag: str, size: int) -> None:
        meta = self._meta(bucket, key)
        os.makedirs(os.path.dirname(meta), exist_ok=True)
        atomic_write(meta, json.dumps({"etag": etag, "size": size}))

    def forget(self, bucket: str, key: str) -> None:
        import contextlib  # here, not at start: `newest` imports this module too

        for path in (self.path(bucket, key), self._meta(bucket, key)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    def recorded_keys(self, bucket: str, prefix: str) -> Iterator[str]:
        """Keys under `prefix` that this cache fetched (files it may remove again), as
        `normal_key` spells them."""
        base = os.path.join(self.root, META_DIR, "meta", bucket)
        prefix = normal_key(prefix) + ("/" if normal_key(prefix) else "")
        start = os.path.join(base, *key_parts(bucket, prefix)[1:])
        top = start if os.path.isdir(start) else os.path.dirname(start)
        for folder, _, names in os.walk(top):
            for name in names:
                if name.endswith(".json"):
                    key = os.path.relpath(os.path.join(folder, name), base)[: -len(".json")]
                    if key.startswith(prefix):
                        yield key

    def lock(self, bucket: str, key: str) -> ObjectLock:
        """Hold the right to fill one entry, waiting for the job that holds it now.

        The lock spans the whole download, so jobs filling the same cache fetch each
        object once: the others wait, then find it fresh.
        """
        handle = self._lock_file(bucket, key)
        fcntl.flock(handle, fcntl.LOCK_EX)
        return ObjectLock(handle)

    def try_lock(self, bucket: str, key: str) -> ObjectLock | None:
        """Like `lock`, but None at once when another job holds the entry."""
        handle = self._lock_file(bucket, key)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return None
        return ObjectLock(handle)

    def _lock_file(self, bucket: str, key: str) -> IO[str]:
        path = self._meta(bucket, key)[: -len(".json")] + ".lock"
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return open(path, "a")  # closed by ObjectLock.release (or try_lock)


class ObjectLock:
    def __init__(self, handle: Any) -> None:
        self._handle = handle

    def release(self) -> None:
        fcntl.flock(self._handle, fcntl.LOCK_UN)
        self._handle.close()

    def __enter__(self) -> ObjectLock:
        return self

    def __exit__(self, *_: object) -> None:
        self.release()
