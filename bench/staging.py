"""Staging: cold stage-in through the cache vs a plain parallel boto3 download of the
same objects from the same server, and the warm-cache time (needs devstack's S3)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

MiB = 1024 * 1024


def run(files: int = 100, size_mib: int = 2, rounds: int = 3) -> list[dict]:
    if not os.environ.get("S3_ENDPOINT_URL"):
        return [
            _row(
                "staging",
                "cold stage-in vs boto3",
                None,
                None,
                "",
                None,
                "skipped: no S3_ENDPOINT_URL (source .devstack/env)",
            )
        ]
    from anylaunch.storage import s3, stagein
    from anylaunch.storage.manifest import Manifest, StageInput

    client = s3.client()
    bucket = f"bench-{uuid.uuid4().hex[:10]}"
    client.create_bucket(Bucket=bucket)
    keys = [f"data/{i:04d}.bin" for i in range(files)]
    blob = os.urandom(size_mib * MiB)
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda k: client.put_object(Bucket=bucket, Key=k, Body=blob), keys))
    work = Path(tempfile.mkdtemp(prefix="anylaunch-bench-stage-"))
    ours, plain, warm = [], [], []
    try:
        for r in range(rounds):
            target = work / f"boto3-{r}"
            target.mkdir()
            start = time.perf_counter()
            with ThreadPoolExecutor(s3.concurrency()) as pool:
                list(
                    pool.map(
                        lambda k, t=target: client.download_file(bucket, k, str(t / Path(k).name)),
                        keys,
                    )
                )
            plain.append(time.perf_counter() - start)

            manifest = Manifest(
                workdir=str(work / f"job-{r}"),
                state_dir=str(work / f"state-{r}"),
                cache_root=str(work / f"cache-{r}"),
                inputs=[StageInput(path="data", uri=f"s3://{bucket}/data/")],
            )
            start = time.perf_counter()
            stagein.run(manifest)
            ours.append(time.perf_counter() - start)
            start = time.perf_counter()
            summary = stagein.run(manifest)
            warm.append(time.perf_counter() - start)
            assert summary.fetched == 0
    finally:
        shutil.rmtree(work, ignore_errors=True)
        for k in keys:
            client.delete_object(Bucket=bucket, Key=k)
        client.delete_bucket(Bucket=bucket)
    total = files * size_mib
    best_ours, best_plain = min(ours), min(plain)
    ratio = best_plain / best_ours  # throughput ratio: ours / boto3
    case = f"{files} objects, {total} MiB"
    return [
        _row(
            "staging",
            f"cold stage-in, {case}",
            best_ours * 1000,
            None,
            "≥ 0.9× boto3 throughput",
            ratio >= 0.9,
            f"{total / best_ours:.0f} MiB/s vs boto3 {total / best_plain:.0f} MiB/s = {ratio:.2f}×",
        ),
        _row(
            "staging",
            f"warm cache, {case}",
            min(warm) * 1000,
            None,
            "metadata calls only",
            summary.fetched == 0,
            "0 bytes transferred",
        ),
    ]


def _row(
    bench: str,
    case: str,
    ms: float | None,
    ratio: float | None,
    goal: str,
    met: bool | None,
    note: str,
) -> dict:
    return {
        "benchmark": bench,
        "case": case,
        "median_ms": None if ms is None else round(ms, 1),
        "ratio_to_python": ratio,
        "goal": goal,
        "met": met,
        "note": note,
    }
