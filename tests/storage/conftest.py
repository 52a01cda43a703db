"""Fixtures for staging tests: the devstack S3 server (moto) and a fresh bucket per test."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

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
    """boto3, an S3 client independent of the runtime's own, to set up and check buckets."""
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=s3env["S3_ENDPOINT_URL"],
        aws_access_key_id=s3env["ACCESS_KEY"],
        aws_secret_access_key=s3env["SECRET_KEY"],
        region_name=s3env.get("CLOUD_REGION", "us-east-1"),
    )


@pytest.fixture
def runtime_file(tmp_path_factory, spawns) -> Path:
    """The runtime's zipapp exactly as a job receives it."""
    from anylaunch.node import runtime

    path = tmp_path_factory.mktemp("runtime") / runtime.FILE_NAME
    path.write_bytes(runtime.zipapp())
    return path


def bare_python() -> str:
    """An interpreter with no project venv behind it: the system's, else the one this
    venv was made from (whose site-packages do not hold anylaunch)."""
    if os.path.exists("/usr/bin/python3"):
        return "/usr/bin/python3"
    return getattr(sys, "_base_executable", sys.executable)


def bare_env(extra: dict[str, str]) -> dict[str, str]:
    """An environment like a bare image's: no PYTHONPATH, no venv on PATH."""
    return {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), **extra}


def _bare_runner(runtime_file: Path, base: dict[str, str]):
    def run(*args: str, env: dict[str, str] | None = None, **kwargs):
        return subprocess.run(
            run.argv(*args), env=run.env(env), capture_output=True, text=True, **kwargs
        )

    run.argv = lambda *args: [bare_python(), "-I", "-S", str(runtime_file), *args]
    run.env = lambda extra=None: bare_env({**base, **(extra or {})})
    return run


@pytest.fixture
def bare(runtime_file):
    """Run the shipped runtime under `python3 -I -S`: the standard library and nothing else."""
    return _bare_runner(runtime_file, {})


@pytest.fixture
def bare_s3(runtime_file, s3env):
    """`bare`, with the devstack S3 settings in its environment."""
    return _bare_runner(runtime_file, s3env)


@pytest.fixture
def bucket(s3client) -> str:
    name = f"t-{uuid.uuid4().hex[:12]}"
    s3client.create_bucket(Bucket=name)
    return name


@pytest.fixture
def cli_env(s3env) -> dict[str, str]:
    return {**os.environ, **s3env}
