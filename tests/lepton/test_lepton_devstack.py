"""scripts/devstack.d/lepton starts the emulator by its own command (`lepton-emulator`,
the emulator's distribution in emulator/) and stops exactly it."""

from __future__ import annotations

import os
import subprocess

import psutil
import pytest
from lepton_helpers import ROOT

from anylaunch.sdk import LeptonSDK

SCRIPT = ROOT / "scripts" / "devstack.d" / "lepton"
# The script starts the emulator as a server process of its own.
pytestmark = pytest.mark.usefixtures("spawns")


def settings(path) -> dict[str, str]:
    line = path.read_text().strip().removeprefix("export ")
    return dict(pair.split("=", 1) for pair in line.split())


def test_up_serves_a_workspace_and_down_stops_only_it(tmp_path, home):
    state = tmp_path / "devstack"
    subprocess.run([str(SCRIPT), "up", str(state)], check=True, timeout=120)
    try:
        env = settings(state / "lepton.env")
        assert env["LEPTON_WORKSPACE_URL"].startswith("http://127.0.0.1:")
        pid = int((state / "lepton" / "pid").read_text())
        proc = psutil.Process(pid)
        assert env["LEPTON_AUTH_TOKEN"] not in " ".join(proc.cmdline())  # not visible in ps
        assert proc.cmdline()[1] == str(ROOT / ".venv" / "bin" / "lepton-emulator")
        subprocess.run([str(SCRIPT), "up", str(state)], check=True, timeout=60)  # idempotent
        assert int((state / "lepton" / "pid").read_text()) == pid
        sdk = LeptonSDK(
            env["LEPTON_WORKSPACE_ID"],
            env["LEPTON_AUTH_TOKEN"],
            workspace_url=env["LEPTON_WORKSPACE_URL"],
        )
        assert "gpu.8xh100-sxm" in sdk.list_resource_shapes()
    finally:
        subprocess.run([str(SCRIPT), "down", str(state)], check=True, timeout=60)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not (state / "lepton.env").exists()
    assert sorted(os.listdir(state)) == ["lepton"]
    status = subprocess.run([str(SCRIPT), "status", str(state)], capture_output=True, text=True)
    assert status.returncode == 1 and "lepton emulator down" in status.stdout


def test_the_devstack_emulator_answers_the_sdk(devstack):
    if "LEPTON_WORKSPACE_URL" not in devstack:
        pytest.skip("the devstack has no Lepton emulator")
    sdk = LeptonSDK(
        devstack["LEPTON_WORKSPACE_ID"],
        devstack["LEPTON_AUTH_TOKEN"],
        workspace_url=devstack["LEPTON_WORKSPACE_URL"],
    )
    volumes = sdk.get_volumes("h100-pool")
    assert [v["type"] for v in volumes] == ["Filestore", "Lustre"]
    # The API says only "nfs": the filesystem is read from the name, and said to be.
    assert all(v["type_guessed"] and v["kind"] == "volume" for v in volumes)


def test_up_relays_this_checkouts_s3_server_into_jobs(tmp_path, home):
    # The s3 service starts before the emulator and writes its endpoint to s3.env; jobs
    # reach that endpoint, and only it, from their own network.
    state = tmp_path / "devstack"
    state.mkdir()
    (state / "s3.env").write_text("export S3_ENDPOINT_URL=http://127.0.0.1:29871\n")
    subprocess.run([str(SCRIPT), "up", str(state)], check=True, timeout=120)
    try:
        argv = psutil.Process(int((state / "lepton" / "pid").read_text())).cmdline()
    finally:
        subprocess.run([str(SCRIPT), "down", str(state)], check=True, timeout=60)
    assert argv[argv.index("--outside") + 1] == "http://127.0.0.1:29871"
