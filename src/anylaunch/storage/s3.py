"""S3 clients from the seed's variables (R-L2): S3_ENDPOINT_URL, ACCESS_KEY, SECRET_KEY,
CLOUD_REGION — or, when they are absent, boto3's standard credential chain."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

# Transfers: 8 MiB parts, 16 streams (ANYLAUNCH_STAGE_PART_MB / ANYLAUNCH_STAGE_CONCURRENCY).
PART_SIZE = 8 * 1024 * 1024


def env_int(name: str, default: int) -> int:
    try:
        return max(int(os.environ.get(name, default)), 1)
    except ValueError:
        return default


def concurrency() -> int:
    return env_int("ANYLAUNCH_STAGE_CONCURRENCY", 16)


def client(environ: Mapping[str, str] | None = None) -> Any:
    import boto3
    from botocore.config import Config

    env = os.environ if environ is None else environ
    kwargs: dict[str, Any] = {}
    if env.get("S3_ENDPOINT_URL"):
        kwargs["endpoint_url"] = env["S3_ENDPOINT_URL"]
    if env.get("ACCESS_KEY") and env.get("SECRET_KEY"):
        kwargs["aws_access_key_id"] = env["ACCESS_KEY"]
        kwargs["aws_secret_access_key"] = env["SECRET_KEY"]
    region = env.get("CLOUD_REGION") or env.get("AWS_DEFAULT_REGION") or env.get("AWS_REGION")
    config = Config(
        region_name=region or "us-east-1",
        retries={"max_attempts": 8, "mode": "adaptive"},
        max_pool_connections=concurrency() * 2 + 4,
        connect_timeout=10,
        read_timeout=120,
    )
    return boto3.session.Session().client("s3", config=config, **kwargs)


def transfer_config() -> Any:
    from boto3.s3.transfer import TransferConfig

    return TransferConfig(
        multipart_threshold=PART_SIZE,
        multipart_chunksize=PART_SIZE,
        max_concurrency=concurrency(),
        use_threads=True,
    )


def error_code(exc: BaseException) -> str:
    """The S3 error code of a botocore ClientError ('NoSuchKey', '403', ...), else its type."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code") or type(exc).__name__)
    return type(exc).__name__
