"""Secrets: planted values of HF_TOKEN (job env), ACCESS_KEY/SECRET_KEY (S3 keys, with a
real S3 input), LEPTON_AUTH_TOKEN and NGC_KEY are looked for after a full run on each
backend — in every file under ANYLAUNCH_HOME (plans, generated scripts, job directories,
logs, the store and its WAL), and in everything anylaunch printed (`run`, `--dry-run`,
`status`, `ps`, `logs`, `diagnose`, `--json` or not, and an error). 0 occurrences; a
file that must hold one would have to be mode 0600.

The job proves it received each secret by printing its length, never its value.
"""

from __future__ import annotations

import json
import secrets
import subprocess
from pathlib import Path

import pytest
from reliability_helpers import FIGURES, PY, cli_env, count_tracebacks, wait_until

from lepton_emulator.server import Server

NAMES = ("HF_TOKEN", "ACCESS_KEY", "SECRET_KEY", "LEPTON_AUTH_TOKEN", "NGC_KEY")


@pytest.fixture
def planted() -> dict[str, str]:
    return {name: f"planted{secrets.token_hex(10)}" for name in NAMES}


@pytest.fixture
def s3_object(devstack: dict[str, str], planted: dict[str, str]) -> str:
    """An object on the devstack S3 server (moto takes any key), written with the planted keys."""
    import boto3

    if "S3_ENDPOINT_URL" not in devstack:
        pytest.fail("devstack has no S3 service: scripts/devstack.d/s3 up .devstack")
    client = boto3.client(
        "s3",
        endpoint_url=devstack["S3_ENDPOINT_URL"],
        aws_access_key_id=planted["ACCESS_KEY"],
        aws_secret_access_key=planted["SECRET_KEY"],
        region_name="us-east-1",
    )
    bucket = f"secrets-{secrets.token_hex(4)}"
    client.create_bucket(Bucket=bucket)
    client.put_object(Bucket=bucket, Key="in/data.txt", Body=b"payload-from-s3\n")
    return f"s3://{bucket}/in/data.txt"


def _job(tmp_path: Path, uri: str, backend: str) -> Path:
    section = {
        "local": "local: {}\n",
        "slurm": "slurm: {}\n",
        # An nvcr.io image: NGC_KEY becomes the workspace's image pull secret.
        "lepton": "image: nvcr.io/nvidia/pytorch:24.01-py3\nlepton: {resource_shape: cpu.small}\n",
    }[backend]
    data = tmp_path / "staged" / "data.txt"  # the same path on the nodes: this host
    path = tmp_path / "job.yaml"
    path.write_text(
        "name: secretive\n"
        "launcher: none\n"
        f"command: [bash, -c, 'echo len=$${{#HF_TOKEN}}; cat {data} 2>&1 || true']\n"
        "env:\n"
        "  HF_TOKEN: ${HF_TOKEN}\n"
        "  NGC_KEY: ${NGC_KEY}\n"
        f"inputs: {{{data}: {uri}}}\n" + section
    )
    return path


@pytest.mark.parametrize("backend", ["local", "slurm", "lepton"])
def test_planted_secrets_appear_nowhere_after_a_full_run(
    lepton_server: Server,
    backend: str,
    planted: dict[str, str],
    s3_object: str,
    devstack: dict[str, str],
    home: Path,
    tmp_path: Path,
) -> None:
    token, s3 = planted["LEPTON_AUTH_TOKEN"], devstack["S3_ENDPOINT_URL"]
    # The S3 server is what a Lepton job reaches outside its own network.
    with lepton_server.open(state_dir=tmp_path / "emulator", token=token, outside=[s3]) as emu:
        env = cli_env(
            home,
            **{**emu.env(), **planted},
            S3_ENDPOINT_URL=devstack["S3_ENDPOINT_URL"],
            CLOUD_REGION="us-east-1",
            SLURM_CONF=devstack["SLURM_CONF"],
        )
        job = _job(tmp_path, s3_object, backend)
        printed: list[str] = []

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            done = subprocess.run(
                [PY, "-m", "anylaunch", *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=180,
                cwd=tmp_path,
            )
            printed.extend([done.stdout, done.stderr])
            count_tracebacks(done.stdout, done.stderr)
            return done

        cli("run", str(job), "--dry-run")
        cli("run", str(job), "--dry-run", "--json")
        started = cli("run", str(job), "--detach", "--json")
        assert started.returncode == 0, started.stderr
        job_id = json.loads(started.stdout)["id"]
        final = wait_until(
            lambda: (
                (s := json.loads(cli("status", job_id, "--json").stdout))["state"]
                in ("SUCCEEDED", "FAILED", "CANCELLED", "TIMEOUT")
                and s
            ),
            timeout=120,
            what="the job to end",
            interval=0.5,
        )
        logs = cli("logs", job_id).stdout
        assert final["state"] == "SUCCEEDED", (final, logs)
        assert f"len={len(planted['HF_TOKEN'])}" in logs
        if backend == "lepton":  # the job's workspace secrets ended with it
            assert [n for n in emu.world.secrets if n.startswith("anylaunch-")] == []
        if backend == "local":  # Slurm and Lepton plans do not stage inputs (yet)
            assert "payload-from-s3" in logs
        for args in (("status", job_id), ("ps",), ("ps", "--json"), ("logs", job_id, "--json"),
                     ("diagnose", job_id, "--json")):  # fmt: skip
            cli(*args)
        bad = tmp_path / "bad.yaml"
        bad.write_text(job.read_text().replace(s3_object, s3_object + "-missing"))
        failed = cli("run", str(bad), "--json")
        assert failed.returncode == 2 and "error" in json.loads(failed.stdout)

    hits = []
    for name, value in planted.items():
        for text in printed:
            if value in text:
                hits.append(f"{name} printed: ...{text[max(0, text.find(value) - 80) :][:160]!r}")
        for path in home.rglob("*"):
            if path.is_file() and value.encode() in path.read_bytes():
                mode = path.stat().st_mode & 0o777
                hits.append(f"{name} in {path.relative_to(home)} (mode {mode:o})")
    FIGURES["secret hits"] += len(hits)
    assert hits == []
