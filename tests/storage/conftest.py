"""Fixtures for staging tests: the devstack S3 server (moto) and a fresh bucket per test."""

from __future__ import annotations

import os
import uuid

import pytest

S3_VARS = ("S3_ENDPOINT_URL", "ACCESS_KEY", "SECRET_KEY", "CLOUD_REGION", "S3_BUCKET_NAME")


@pytest.fixture
def s3env(devstack, monkeypatch) -> dict[str, str]:
    """The devstack S3 settings, also exported to this process (for the API and boto3)."""
    env = {k: devstack[k] for k in S3_VARS if k in devstack}
    if "S3_ENDPOINT_URL" not in env:
        pytest.fail("devstack has no S3 service: run scripts/devstack up")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


@pytest.fixture
def s3client(s3env):
    from anylaunch.storage import s3

    return s3.client(s3env)


@pytest.fixture
def bucket(s3client) -> str:
    name = f"t-{uuid.uuid4().hex[:12]}"
    s3client.create_bucket(Bucket=name)
    return name


@pytest.fixture
def cli_env(s3env) -> dict[str, str]:
    return {**os.environ, **s3env}
