"""Lepton preflight against the emulator: the API answers with the token, resources
resolve, and mounts stay within the volume's storage permissions."""

from __future__ import annotations


def _checks(cli_inproc, path, devstack, *extra):
    env = {
        k: devstack[k] for k in ("LEPTON_WORKSPACE_URL", "LEPTON_WORKSPACE_ID", "LEPTON_AUTH_TOKEN")
    }
    result = cli_inproc("preflight", str(path), "--json", *extra, env=env)
    return result.rc, {(c["name"], c["status"]): c for c in result.json()["checks"]}


def test_a_mount_outside_the_permitted_prefixes_fails_naming_them(cli_inproc, write, devstack):
    path = write(
        """
        image: nvcr.io/nvidia/pytorch:25.08-py3
        command: python -m train
        mounts: ["/lustre/private/data:/data"]
        lepton: {gpu_count: 1, dedicated_node_group: h100-pool}
        """
    )
    rc, checks = _checks(cli_inproc, path, devstack)
    assert rc == 2
    failed = checks[("mounts", "fail")]
    assert "/lustre/private/data on volume lustre" in failed["message"]
    assert "/lustre/scratch" in failed["message"]
    assert ("lepton_api", "ok") in checks


def test_a_permitted_mount_and_the_discovered_one_pass(cli_inproc, write, devstack):
    path = write(
        """
        image: nvcr.io/nvidia/pytorch:25.08-py3
        command: python -m train
        mounts: ["/lustre/scratch/me:/data"]
        lepton: {gpu_count: 1, dedicated_node_group: h100-pool}
        """
    )
    rc, checks = _checks(cli_inproc, path, devstack)
    assert rc == 0 and ("mounts", "ok") in checks
    rc, checks = _checks(cli_inproc, path, devstack, "--set", "mounts=[]")
    assert rc == 0 and ("mounts", "ok") in checks


def test_a_bad_token_fails_at_once(cli_inproc, write, devstack):
    path = write("image: x/y:1\ncommand: python -m train\nlepton: {gpu_count: 1}\n")
    env = {
        "LEPTON_WORKSPACE_URL": devstack["LEPTON_WORKSPACE_URL"],
        "LEPTON_WORKSPACE_ID": "ws",
        "LEPTON_AUTH_TOKEN": "wrong",
    }
    result = cli_inproc("preflight", str(path), "--json", env=env)
    assert result.rc == 2
    failed = [c for c in result.json()["checks"] if c["status"] == "fail"]
    assert failed and failed[0]["name"] == "lepton_api" and "token" in failed[0]["message"].lower()
