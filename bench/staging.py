"""Staging: cold stage-in through the cache (the in-job runtime's stdlib S3 client, as a
job runs it) vs a plain parallel boto3 download of the same objects from the same
server, and the warm-cache time (needs devstack's S3; boto3 comes with the test extra)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.common import Row, ms, skipped, use_devstack

MiB = 1024 * 1024


GROUP = "staging"


def run(rounds: int = 3) -> list[Row]:
    why = use_devstack("S3_ENDPOINT_URL")
    if why:
        return [skipped(GROUP, "cold stage-in vs boto3", "≥ 0.9× boto3 throughput", why)]
    # Many small objects (one GET each), then a few large ones (parallel ranged GETs).
    return [*_case(100, 2, rounds), *_case(4, 48, rounds)]


def _case(files: int, size_mib: int, rounds: int) -> list[Row]:
    import boto3

    from anylaunch.node.runtime import s3, stage

    client = boto3.client(
        "s3",
        endpoint_url=os.environ["S3_ENDPOINT_URL"],
        aws_access_key_id=os.environ.get("ACCESS_KEY"),
        aws_secret_access_key=os.environ.get("SECRET_KEY"),
        region_name=os.environ.get("CLOUD_REGION", "us-east-1"),
    )
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

            manifest = {
                "workdir": str(work / f"job-{r}"),
                "state_dir": str(work / f"state-{r}"),
                "cache_root": str(work / f"cache-{r}"),
                "inputs": [{"path": "data", "uri": f"s3://{bucket}/data/"}],
            }
            Path(manifest["workdir"]).mkdir()
            start = time.perf_counter()
            stage.stage_in(manifest)
            ours.append(time.perf_counter() - start)
            counted = s3.Client()
            start = time.perf_counter()
            summary = stage.stage_in(manifest, counted)
            warm.append(time.perf_counter() - start)
            assert summary.fetched == 0 and counted.calls == {"ListObjectsV2": 1}
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
        Row(
            GROUP,
            f"cold stage-in, {case}",
            ours=f"{ms(best_ours * 1000)} ({total / best_ours:.0f} MiB/s)",
            other=f"boto3 {ms(best_plain * 1000)} ({total / best_plain:.0f} MiB/s)",
            goal="≥ 0.9× boto3 throughput",
            met=ratio >= 0.9,
            note=f"{ratio:.2f}× boto3; best of {rounds}, interleaved",
            data={"ours_ms": best_ours * 1000, "boto3_ms": best_plain * 1000, "ratio": ratio},
        ),
        Row(
            GROUP,
            f"warm cache, {case}",
            ours=ms(min(warm) * 1000),
            goal="no bytes transferred",
            met=summary.fetched == 0,
            note="one LIST, no GET",
            data={"warm_ms": min(warm) * 1000},
        ),
    ]
