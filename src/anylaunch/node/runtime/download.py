"""Bring the cache's copy of an S3 object or prefix up to date.

One LIST (or HEAD) says what is there; objects whose record does not match are fetched
in parallel ranged GETs on one pool, each pinned to the listed ETag, into a temporary
file that is renamed into place only when every range arrived and the file has the
object's size. Objects deleted in S3 leave the cache too.
"""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import ThreadPoolExecutor

from .cache import Cache, ObjectLock, StageError, key_parts, normal_key, temp_name
from .progress import Progress
from .s3 import Client, MiB, S3Error, concurrency, part_size

TYPE_CHECKING = False  # typing's own flag, without importing typing at start
if TYPE_CHECKING:
    from typing import Any, Tuple

    Remote = Tuple[str, str, int]  # key, ETag, size

_BATCH = 256  # objects locked at once: bounds the number of open lock files


class Summary:
    def __init__(self) -> None:
        self.objects = self.fetched = self.bytes_fetched = self.bytes_total = self.removed = 0
        self.refreshed: list[str] = []

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def is_prefix(key: str) -> bool:
    return key == "" or key.endswith("/")


def describe(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, S3Error) else type(exc).__name__


def list_remote(client: Client, bucket: str, key: str) -> tuple[str, list[Remote]]:
    """The objects behind a URI: one object (HEAD) or everything under a prefix (LIST).

    `s3://b/dir` without a slash is a prefix when no object has that exact key.
    Returns the resolved key (a prefix gains its slash) and the objects. Every key must
    name its own file inside the URI's folder (path safety: the listing comes from the
    server, and the cache writes where it says): otherwise nothing is fetched.
    """
    key_parts(bucket, key)
    if not is_prefix(key):
        try:
            etag, size = client.head_object(bucket, key)
            return key, [(key, etag, size)]
        except S3Error as exc:
            if exc.status != 404:
                raise StageError(f"s3://{bucket}/{key}: cannot read ({exc.code})") from None
        key += "/"
    try:
        objects = [o for o in client.list_objects(bucket, key) if not o[0].endswith("/")]
    except S3Error as exc:
        raise StageError(f"s3://{bucket}/{key}: cannot list ({exc.code})") from None
    if not objects:
        raise StageError(
            f"{bucket}/{key.rstrip('/')}: no such object or prefix in S3 — check the exact path"
        )
    seen: dict[str, str] = {}
    for name, _, _ in objects:
        if not name.startswith(key):
            raise StageError(
                f"s3://{bucket}/{name}: listed under s3://{bucket}/{key} but not inside it"
                " — not staged; check the endpoint (S3_ENDPOINT_URL)"
            )
        key_parts(bucket, name)
        other = seen.setdefault(normal_key(name), name)
        if other != name:
            raise StageError(
                f"s3://{bucket}/{name} and s3://{bucket}/{other} would be one file"
                " — not staged; rename one of the objects"
            )
    return key, objects


class _Download:
    """One object being fetched into a temporary file, in ranges on the shared pool."""

    def __init__(self, obj: Remote, tmp: str, lock: ObjectLock) -> None:
        self.obj, self.tmp, self.lock = obj, tmp, lock
        self.futures: list[Any] = []


def _fetch_range(
    client: Client, bucket: str, obj: Remote, tmp: str, start: int, end: int, progress: Progress
) -> None:
    key, etag, size = obj
    for attempt in range(3):
        with open(tmp, "r+b") as handle:
            handle.seek(start)
            written = [0]

            def sink(chunk: Any, handle: Any = handle, written: list[int] = written) -> None:
                handle.write(chunk)
                written[0] += len(chunk)
                progress.bytes(len(chunk))

            try:
                client.get_range(bucket, key, etag, start, end, size, sink)
                return
            except S3Error as exc:
                progress.bytes(-written[0])  # these bytes are fetched again
                if exc.code != "NetworkError" or attempt == 2:
                    raise


def _finish(cache: Cache, bucket: str, download: _Download) -> None:
    """Put a fetched object in place, if it is whole: every range came back, and the
    file has the listed size (a server's answer must never lengthen it)."""
    for future in download.futures:
        future.result()
    written = os.path.getsize(download.tmp)
    if written != download.obj[2]:
        raise S3Error(
            "WrongLength", 0, f"the file is {written} bytes, the object {download.obj[2]}"
        )
    os.replace(download.tmp, cache.path(bucket, download.obj[0]))
    cache.record(bucket, *download.obj)


def sync(
    client: Client, cache: Cache, bucket: str, key: str, summary: Summary, label: str
) -> tuple[str, list[Remote]]:
    """Bring the cache's copy of a URI up to date; return the resolved key and its objects."""
    key, objects = list_remote(client, bucket, key)
    summary.objects += len(objects)
    summary.bytes_total += sum(o[2] for o in objects)
    stale = [o for o in objects if not cache.is_fresh(bucket, *o)]
    if is_prefix(key):  # objects deleted in S3 must disappear from the input too
        listed = {normal_key(o[0]) for o in objects}
        for old in list(cache.recorded_keys(bucket, key)):
            if old not in listed:
                cache.forget(bucket, old)
                summary.removed += 1
    if not stale:
        return key, objects
    progress = Progress(label, sum(o[2] for o in stale), len(stale))
    errors: list[str] = []
    # Ranges: at least the part size, larger when few big objects would leave streams
    # idle anyway (fewer requests for the same parallelism), at most 64 MiB (a retry
    # refetches one range).
    size = min(max(part_size(), -(-progress.total // concurrency())), 64 * MiB)

    def fetch(pool: ThreadPoolExecutor, batch: list[Remote]) -> list[Remote]:
        """Download what we can lock now; return what another job is fetching."""
        busy, pending = [], []
        for obj in batch:
            lock = cache.try_lock(bucket, obj[0])
            if lock is None:
                busy.append(obj)
                continue
            if cache.is_fresh(bucket, *obj):  # fetched by another job meanwhile
                lock.release()
                continue
            download = _Download(obj, temp_name(cache.path(bucket, obj[0])), lock)
            with open(download.tmp, "r+b") as handle:
                handle.truncate(obj[2])
            starts = range(0, obj[2], size) if obj[2] else [0]
            for start in starts:
                end = min(start + size, obj[2]) - 1
                download.futures.append(
                    pool.submit(
                        _fetch_range, client, bucket, obj, download.tmp, start, end, progress
                    )
                )
            pending.append(download)
        for download in pending:
            with download.lock:
                try:
                    _finish(cache, bucket, download)
                except Exception as exc:  # the first failure names the object
                    for future in download.futures:
                        future.cancel()
                    for future in download.futures:
                        if not future.cancelled():
                            future.exception()  # written no more: safe to remove
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(download.tmp)
                    errors.append(f"s3://{bucket}/{download.obj[0]}: {describe(exc)}")
                    continue
            progress.file_done()
            summary.fetched += 1
            summary.bytes_fetched += download.obj[2]
            summary.refreshed.append(download.obj[0])
        return busy

    with ThreadPoolExecutor(concurrency()) as pool:
        for start in range(0, len(stale), _BATCH):
            for obj in fetch(pool, stale[start : start + _BATCH]):
                with cache.lock(bucket, obj[0]):  # wait for the other job
                    pass
                if not cache.is_fresh(bucket, *obj):  # it failed: our turn
                    fetch(pool, [obj])
    progress.close()
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise StageError(
            f"download failed: {errors[0]}{more} — the object changed, is unreadable or came"
            " back wrong; nothing of it was kept: rerun"
        )
    return key, objects
