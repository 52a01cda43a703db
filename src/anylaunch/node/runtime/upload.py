"""Upload files to S3; a big one as a multipart upload that a rerun resumes.

The upload id of a multipart upload is kept in the job's state directory, so a rerun
asks S3 which parts it holds (ListParts) and sends only the rest; a file already sent
unchanged (same size and mtime) is skipped.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading

from .cache import Cache, atomic_write
from .progress import Progress
from .s3 import Client, S3Error, part_size

TYPE_CHECKING = False  # typing's own flag, without importing typing at start
if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor
    from typing import Any


class UploadSummary:
    def __init__(self) -> None:
        self.files = self.uploaded = self.skipped = self.bytes_uploaded = 0
        self.parts_sent = self.parts_resumed = 0

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def _load(path: str) -> dict[str, Any]:
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


class Uploader:
    def __init__(
        self,
        client: Client,
        manifest: dict[str, Any],
        summary: UploadSummary,
        pool: ThreadPoolExecutor,
    ) -> None:
        self.client, self.summary, self.pool = client, summary, pool
        self.state = os.path.join(manifest["state_dir"], "uploads")
        root = manifest.get("cache_root")
        self.cache = Cache(root) if root else None
        self.part_size = part_size()
        self.progress: Progress | None = None
        self._lock = threading.Lock()

    def _state(self, kind: str, bucket: str, key: str) -> str:
        digest = hashlib.sha1(f"{bucket}/{key}".encode()).hexdigest()
        return os.path.join(self.state, kind, f"{digest}.json")

    def _count(self, **fields: int) -> None:
        with self._lock:
            for name, value in fields.items():
                setattr(self.summary, name, getattr(self.summary, name) + value)

    def upload(self, path: str, bucket: str, key: str) -> None:
        stat = os.stat(path)
        ident = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
        done = self._state("done", bucket, key)
        if _load(done).get("ident") == ident:
            self._count(skipped=1)
            if self.progress is not None:
                self.progress.file_done()
            return
        if stat.st_size <= self.part_size:
            with open(path, "rb") as handle:
                etag = self.client.put_object(bucket, key, handle.read())
            self._advance(stat.st_size)
        else:
            etag = self._multipart(path, bucket, key, ident)
        os.makedirs(os.path.dirname(done), exist_ok=True)
        atomic_write(done, json.dumps({"ident": ident, "etag": etag}))
        self._count(uploaded=1, bytes_uploaded=stat.st_size)
        if self.progress is not None:
            self.progress.file_done()
        if self.cache is not None and os.path.realpath(path) == os.path.realpath(
            self.cache.path(bucket, key)
        ):
            self.cache.record(bucket, key, etag, stat.st_size)

    def _advance(self, count: int) -> None:
        if self.progress is not None:
            self.progress.bytes(count)

    def _multipart(self, path: str, bucket: str, key: str, ident: dict[str, int]) -> str:
        state_file = self._state("multipart", bucket, key)
        state = _load(state_file)
        parts: dict[int, str] | None = None
        if state.get("ident") == ident and state.get("part_size") == self.part_size:
            try:
                parts = self.client.list_parts(bucket, key, state["upload_id"])
            except S3Error as exc:
                if exc.code not in ("NoSuchUpload", "404"):
                    raise
        if parts is None:  # nothing to resume: a new upload
            upload_id = self.client.create_multipart_upload(bucket, key)
            state = {"ident": ident, "part_size": self.part_size, "upload_id": upload_id}
            os.makedirs(os.path.dirname(state_file), exist_ok=True)
            atomic_write(state_file, json.dumps(state))
            parts = {}
        upload_id = state["upload_id"]
        size = ident["size"]
        count = -(-size // self.part_size)
        self._count(parts_resumed=len(parts))
        self._advance(sum(min(self.part_size, size - (n - 1) * self.part_size) for n in parts))

        def send(number: int) -> tuple[int, str]:
            with open(path, "rb") as handle:
                handle.seek((number - 1) * self.part_size)
                data = handle.read(self.part_size)
            etag = self.client.upload_part(bucket, key, upload_id, number, data)
            self._count(parts_sent=1)
            self._advance(len(data))
            return number, etag

        todo = [n for n in range(1, count + 1) if n not in parts]
        parts.update(dict(self.pool.map(send, todo)))
        etag = self.client.complete_multipart_upload(bucket, key, upload_id, parts)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(state_file)
        return etag
