"""The official leptonai SDK (0.47.1, in its own virtualenv made by scripts/devstack.d/lepton)
works against the emulator: create, list, get, stream logs, read history, delete; and the
emulator refuses what Lepton refuses."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from lepton_helpers import ROOT

SCRIPT = Path(__file__).with_name("sdk_script.py")


def sdk_python() -> str:
    found = os.environ.get("LEPTON_SDK_PYTHON") or str(
        ROOT / ".devstack" / "lepton-sdk-venv" / "bin" / "python"
    )
    if not Path(found).exists():
        if os.environ.get("ANYLAUNCH_REQUIRE_DEVSTACK"):
            pytest.fail("the official Lepton SDK is not installed: run scripts/devstack up")
        pytest.skip("the official Lepton SDK is not installed (scripts/devstack.d/lepton up)")
    return found


def test_the_official_sdk_creates_lists_streams_and_deletes_a_job(emulator):
    python = sdk_python()
    version = subprocess.run(
        [python, "-c", "import importlib.metadata as m; print(m.version('leptonai'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert version == "0.47.1"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/tmp"),
        "LEPTON_WORKSPACE_TOKEN": emulator.token,
    }
    proc = subprocess.run(
        [python, str(SCRIPT), emulator.world.workspace, emulator.url],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    job_id = seen["created"]["id"]
    assert seen["created"]["name"] == "sdk-job" and job_id.startswith("sdk-job-")
    assert seen["state"] == "Completed"
    assert seen["listed"] == [job_id]
    assert seen["by_label"] == [job_id] and seen["by_other_label"] == []
    assert seen["by_set"] == [job_id] and seen["by_other_set"] == []
    assert len(seen["replicas"]) == 1 and seen["replicas"][0].startswith(f"{job_id}-0-")
    assert f"hello-from-{job_id}" in seen["stream"] and "A=1" in seen["stream"]
    assert f"hello-from-{job_id}" in seen["history"]
    assert seen["deleted"] is True and seen["after_delete"] == []
    assert seen["refused"] == {
        case: [400, "ValidationError"]
        for case in (
            "env_value_not_a_string",
            "mount_without_from",
            "negative_ttl",
            "no_image",
            "no_shape",
            "reserved_env",
        )
    }
    nodes = seen["nodes"]
    assert len(nodes) == 4 and seen["placed_on"] and set(seen["placed_on"]) <= set(nodes[2:])
    first, second = seen["twins"]
    assert first != second and first.startswith("twin-") and second.startswith("twin-")
