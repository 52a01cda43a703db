"""Stage-out: upload outputs to S3, resuming an interrupted upload instead of restarting.

Large files go up as multipart uploads whose id is kept in the job's state directory;
a rerun asks S3 which parts it already holds (ListParts) and sends only the rest.
Files already uploaded unchanged (same size and mtime) are skipped. When the outputs
live on the shared-filesystem cache, each uploaded file is recorded there with its new
ETag, so a later job that reads the same URI finds it warm.
"""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anylaunch.storage import s3
from anylaunch.storage.cache import Cache, RemoteObject, atomic_write
from anylaunch.storage.manifest import Manifest
from anylaunch.storage.progress import Progress
from anylaunch.storage.stagein import StageError
from anylaunch.storage.uri import S3Uri, parse_s3


@dataclass
class UploadSummary:
    files: int = 0
    uploaded: int = 0
    skipped: int = 0
    bytes_uploaded: int = 0
    parts_sent: int = 0
    parts_resumed: int = 0


def _files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and not p.name.endswith(".part") and ".anylaunch" not in p.parts
    )


class Uploader:
    def __init__(
        self, client: Any, manifest: Manifest, summary: UploadSummary, pool: ThreadPoolExecutor
    ) -> None:
        self.client, self.summary, self.pool = client, summary, pool
        self.state = Path(manifest.state_dir, "uploads")
        self.cache = Cache(manifest.cache_root) if manifest.cache_root else None
        self.part_size = max(s3.env_int("ANYLAUNCH_STAGE_PART_MB", 8), 5) * 1024 * 1024
        self.progress: Progress | None = None

    def _state(self, kind: str, bucket: str, key: str) -> Path:
        digest = hashlib.sha1(f"{bucket}/{key}".encode()).hexdigest()
        return self.state / kind / f"{digest}.json"

    def upload(self, path: Path, bucket: str, key: str) -> None:
        stat = path.stat()
        ident = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
        done = self._state("done", bucket, key)
        if _load(done).get("ident") == ident:
            self.summary.skipped += 1
            return
        if stat.st_size <= self.part_size:
            with open(path, "rb") as body:
                etag = self.client.put_object(Bucket=bucket, Key=key, Body=body)["ETag"]
            self._advance(stat.st_size)
        else:
            etag = self._multipart(path, bucket, key, ident)
        done.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(done, json.dumps({"ident": ident, "etag": etag}))
        self.summary.uploaded += 1
        self.summary.bytes_uploaded += stat.st_size
        if self.progress is not None:
            self.progress.file_done()
        if (
            self.cache is not None
            and path.resolve() == self.cache.path(S3Uri(bucket, key)).resolve()
        ):
            self.cache.record(bucket, RemoteObject(key, etag, stat.st_size))

    def _advance(self, count: int) -> None:
        if self.progress is not None:
            self.progress.bytes(count)

    def _multipart(self, path: Path, bucket: str, key: str, ident: dict[str, int]) -> str:
        state_file = self._state("multipart", bucket, key)
        state = _load(state_file)
        parts: dict[int, str] | None = None
        if state.get("ident") == ident and state.get("part_size") == self.part_size:
            parts = self._uploaded_parts(bucket, key, state["upload_id"])
        if parts is None:  # nothing to resume: a new upload
            upload_id = self.client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
            state = {"ident": ident, "part_size": self.part_size, "upload_id": upload_id}
            state_file.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(state_file, json.dumps(state))
            parts = {}
        upload_id = state["upload_id"]
        count = -(-ident["size"] // self.part_size)
        self.summary.parts_resumed += len(parts)
        self._advance(
            sum(min(self.part_size, ident["size"] - (n - 1) * self.part_size) for n in parts)
        )

        def send(number: int) -> tuple[int, str]:
            with open(path, "rb") as handle:
                handle.seek((number - 1) * self.part_size)
                data = handle.read(self.part_size)
            etag = self.client.upload_part(
                Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=data
            )["ETag"]
            self.summary.parts_sent += 1
            self._advance(len(data))
            return number, etag

        todo = [n for n in range(1, count + 1) if n not in parts]
        parts.update(dict(self.pool.map(send, todo)))
        result = self.client.complete_multipart_upload(
            Bucket=bucket,
            Key=key,
            UploadId=upload_id,
            MultipartUpload={"Parts": [{"PartNumber": n, "ETag": parts[n]} for n in sorted(parts)]},
        )
        state_file.unlink(missing_ok=True)
        return result["ETag"]

    def _uploaded_parts(self, bucket: str, key: str, upload_id: str) -> dict[int, str] | None:
        """Parts S3 already holds for an upload we started, or None if it is gone."""
        parts: dict[int, str] = {}
        try:
            for page in self.client.get_paginator("list_parts").paginate(
                Bucket=bucket, Key=key, UploadId=upload_id
            ):
                for part in page.get("Parts", []):
                    parts[part["PartNumber"]] = part["ETag"]
        except Exception as exc:
            if s3.error_code(exc) in ("NoSuchUpload", "404"):
                return None
            raise
        return parts


def _load(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def run(manifest: Manifest) -> UploadSummary:
    summary = UploadSummary()
    if not manifest.outputs:
        return summary
    client = s3.client()
    jobs: list[tuple[Path, str, str]] = []
    for item in manifest.outputs:
        root = Path(manifest.workdir, item.path)
        if not root.exists():
            continue  # the program wrote nothing there
        uri = parse_s3(item.uri)
        if root.is_file() and not uri.is_prefix:
            jobs.append((root, uri.bucket, uri.key))
            continue
        base = root if root.is_dir() else root.parent
        prefix = uri.key if uri.is_prefix else uri.key + "/"
        real_root = root.resolve()
        for path in _files(root):
            # Path safety: a link inside the outputs must not upload what lies outside them.
            if not path.resolve().is_relative_to(
                real_root if real_root.is_dir() else real_root.parent
            ):
                raise StageError(
                    f"{path}: a link out of the output directory {root} — not uploaded"
                )
            jobs.append((path, uri.bucket, prefix + path.relative_to(base).as_posix()))
    summary.files = len(jobs)
    with (
        ThreadPoolExecutor(s3.concurrency()) as parts,
        ThreadPoolExecutor(s3.concurrency()) as files,
    ):
        uploader = Uploader(client, manifest, summary, parts)
        uploader.progress = Progress(
            "stage-out", sum(p.stat().st_size for p, _, _ in jobs), len(jobs)
        )
        list(files.map(lambda job: uploader.upload(*job), jobs))
        uploader.progress.close()
    return summary
