"""Stage-in: make every input available at its path, through the cache (R-L11, R-X5).

A warm cache costs metadata calls only: one batched listing per prefix (1,000 keys a
call) or one HEAD per object. Missing or changed objects are fetched in parallel with
s3transfer (ranged GETs for large ones), each pinned with If-Match to the ETag that was
listed, so a file never mixes two versions of an object.
"""

from __future__ import annotations

import os
import shutil
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anylaunch.storage import s3
from anylaunch.storage.cache import Cache, RemoteObject, temp_name
from anylaunch.storage.manifest import Manifest, StageInput
from anylaunch.storage.progress import Progress
from anylaunch.storage.uri import S3Uri, parse_s3, scheme_of

ARCHIVES = (".tar", ".tar.gz", ".tgz")
_BATCH = 256


class StageError(Exception):
    """An input that cannot be staged; the message says which and why."""


@dataclass
class Summary:
    objects: int = 0
    fetched: int = 0
    bytes_fetched: int = 0
    bytes_total: int = 0
    removed: int = 0
    refreshed: list[str] = field(default_factory=list)


def list_remote(client: Any, uri: S3Uri) -> tuple[S3Uri, list[RemoteObject]]:
    """The objects behind a URI: one object (HEAD) or everything under a prefix (LIST).

    `s3://b/dir` without a slash is a prefix when no object has that exact key.
    """
    if not uri.is_prefix:
        try:
            head = client.head_object(Bucket=uri.bucket, Key=uri.key)
            return uri, [RemoteObject(uri.key, head["ETag"], head["ContentLength"])]
        except Exception as exc:
            if s3.error_code(exc) not in ("404", "NoSuchKey", "NotFound"):
                raise StageError(f"{uri}: cannot read ({s3.error_code(exc)})") from None
        uri = S3Uri(uri.bucket, uri.key + "/")
    objects = []
    paginator = client.get_paginator("list_objects_v2")
    try:
        for page in paginator.paginate(Bucket=uri.bucket, Prefix=uri.key):
            for item in page.get("Contents", []):
                if not item["Key"].endswith("/"):  # "directory" placeholder objects
                    objects.append(RemoteObject(item["Key"], item["ETag"], item["Size"]))
    except Exception as exc:
        raise StageError(f"{uri}: cannot list ({s3.error_code(exc)})") from None
    if not objects:
        raise StageError(
            f"{uri.bucket}/{uri.key.rstrip('/')}: no such object or prefix in S3 — check the exact path"
        )
    return uri, objects


def sync(
    client: Any, cache: Cache, uri: S3Uri, summary: Summary, label: str
) -> tuple[S3Uri, list[RemoteObject]]:
    """Bring the cache's copy of `uri` up to date; return the resolved URI and its objects."""
    from s3transfer.manager import TransferManager
    from s3transfer.subscribers import BaseSubscriber

    uri, objects = list_remote(client, uri)
    summary.objects += len(objects)
    summary.bytes_total += sum(o.size for o in objects)
    stale = [o for o in objects if not cache.is_fresh(uri.bucket, o)]
    if uri.is_prefix:  # objects deleted in S3 must disappear from the input too
        listed = {o.key for o in objects}
        for key in list(cache.recorded_keys(uri.bucket, uri.key)):
            if key not in listed:
                cache.forget(uri.bucket, key)
                summary.removed += 1
    if not stale:
        return uri, objects
    progress = Progress(label, sum(o.size for o in stale), len(stale))

    class Report(BaseSubscriber):  # type: ignore[misc]
        def __init__(self, obj: RemoteObject) -> None:
            self.obj = obj

        def on_queued(self, future: Any, **_: Any) -> None:
            # What we listed, handed to s3transfer: no HEAD per object, and every ranged
            # GET carries If-Match on this ETag, so a file never mixes two versions.
            future.meta.provide_transfer_size(self.obj.size)
            future.meta.provide_object_etag(self.obj.etag)

        def on_progress(self, future: Any, bytes_transferred: int, **_: Any) -> None:
            progress.bytes(bytes_transferred)

        def on_done(self, future: Any, **_: Any) -> None:
            progress.file_done()

    errors: list[str] = []

    def fetch(manager: Any, batch: list[RemoteObject]) -> list[RemoteObject]:
        """Download what we can lock now; return what another job is fetching."""
        busy, pending = [], []
        for obj in batch:
            lock = cache.lock(uri.bucket, obj.key, wait=False)
            if lock is None:
                busy.append(obj)
            elif cache.is_fresh(uri.bucket, obj):  # fetched by another job meanwhile
                lock.release()
            else:
                tmp = temp_name(cache.root / uri.bucket / obj.key)
                future = manager.download(uri.bucket, obj.key, str(tmp), subscribers=[Report(obj)])
                pending.append((obj, tmp, future, lock))
        for obj, tmp, future, lock in pending:
            with lock:
                try:
                    future.result()
                except Exception as exc:
                    tmp.unlink(missing_ok=True)
                    errors.append(f"s3://{uri.bucket}/{obj.key}: {s3.error_code(exc)}")
                    continue
                os.replace(tmp, cache.root / uri.bucket / obj.key)
                cache.record(uri.bucket, obj)
            summary.fetched += 1
            summary.bytes_fetched += obj.size
            summary.refreshed.append(obj.key)
        return busy

    with TransferManager(client, s3.transfer_config()) as manager:
        # Batches bound the number of lock files held open at once.
        for start in range(0, len(stale), _BATCH):
            for obj in fetch(manager, stale[start : start + _BATCH]):
                with cache.lock(uri.bucket, obj.key):  # wait for the other job
                    pass
                if not cache.is_fresh(uri.bucket, obj):  # it failed: our turn
                    fetch(manager, [obj])
    progress.close()
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise StageError(
            f"download failed: {errors[0]}{more} — the object changed or is unreadable; rerun"
        )
    return uri, objects


def unpack(archive: Path, into: Path) -> Path:
    """Unpack once per archive version; the tree appears whole (renamed when complete)."""
    if into.is_dir():
        return into
    tmp = Path(str(into) + f".{os.getpid()}.part")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with tarfile.open(archive) as tar:
        tar.extractall(tmp, filter="data")  # refuses absolute paths, links out of the tree
    try:
        os.replace(tmp, into)
    except OSError:  # another job finished first: theirs is identical
        shutil.rmtree(tmp, ignore_errors=True)
    return into


def place(link: Path, target: Path) -> None:
    """Make `link` show `target`, replacing only a link we made before."""
    if link.is_symlink():
        link.unlink()
    elif link.exists():
        raise StageError(
            f"{link}: exists and is not a link made by anylaunch — choose another input path"
        )
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target, target_is_directory=target.is_dir())


def stage_input(client: Any, manifest: Manifest, item: StageInput, summary: Summary) -> Path:
    link = Path(manifest.workdir, item.path)
    if scheme_of(item.uri) is None:  # a local path: shown in place
        source = Path(manifest.workdir, item.uri)
        if not source.exists():
            raise StageError(f"{item.uri}: no such file or directory")
        place(link, source)
        return source
    cache = Cache(manifest.cache_root or Path(manifest.state_dir, "inputs"))
    uri, objects = sync(client, cache, parse_s3(item.uri), summary, f"stage-in {item.path}")
    source = cache.path(uri)
    if uri.is_prefix:
        source.mkdir(parents=True, exist_ok=True)
    if item.unpack:
        if not source.name.endswith(ARCHIVES):
            raise StageError(
                f"{item.uri}: unpack is set but it is not a .tar, .tar.gz or .tgz archive"
            )
        version = objects[0].etag.strip('"')
        source = unpack(
            source, cache.root / ".anylaunch" / "unpacked" / uri.bucket / f"{uri.key}@{version}"
        )
    place(link, source)
    return source


def run(manifest: Manifest) -> Summary:
    summary = Summary()
    client = s3.client() if any(scheme_of(i.uri) == "s3" for i in manifest.inputs) else None
    for item in manifest.inputs:
        stage_input(client, manifest, item, summary)
    for item in manifest.outputs:  # outputs on a shared filesystem are written there first
        target = Path(manifest.workdir, item.path)
        if manifest.cache_root and not target.exists() and not target.is_symlink():
            home = Cache(manifest.cache_root).path(parse_s3(item.uri))
            home.mkdir(parents=True, exist_ok=True)
            place(target, home)
        elif not target.exists():
            target.mkdir(parents=True)
    return summary
