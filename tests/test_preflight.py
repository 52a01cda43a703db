"""Preflight: checks before submit, each ok / warn / fail with a fix; failures stop `run`."""

from __future__ import annotations

import socket


def test_lepton_without_a_token_fails_naming_the_variable_and_how_to_get_one(cli_inproc, write):
    path = write("command: python -m train\nlepton: {gpu_count: 1}\n")
    env = {"LEPTON_AUTH_TOKEN": "", "LEPTON_WORKSPACE_ID": "ws1"}
    result = cli_inproc("preflight", str(path), "--json", env=env)
    assert result.rc == 2
    report = result.json()
    assert report["ok"] is False
    failed = [c for c in report["checks"] if c["status"] == "fail"]
    assert [c["message"] for c in failed] == ["LEPTON_AUTH_TOKEN is not set"]
    assert "Settings → Tokens" in failed[0]["fix"]
    run = cli_inproc("run", str(path), env=env)
    assert run.rc == 2 and "LEPTON_AUTH_TOKEN is not set" in run.err and run.err.count("\n") == 1
    assert cli_inproc("ps", "--json").json() == []


def test_a_busy_local_master_port_fails_before_anything_runs(cli, write):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        path = write(f"launcher: none\ncommand: [true]\nlocal: {{master_port: {port}}}\n")
        result = cli("run", str(path), "--json")
        assert result.rc == 2
        error = result.json()
        assert error["error"]["code"] == "PREFLIGHT"
        assert (
            error["checks"][0]["name"] == "master_port"
            and str(port) in error["checks"][0]["message"]
        )
        assert cli("run", str(path), "--no-preflight", "--json").rc in (0, 1)  # skipped on request


def test_hugging_face_jobs_without_a_token_are_warned_not_stopped(cli, write):
    path = write(
        "launcher: none\ncommand: [true]\nmodel:\n  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B\n"
    )
    result = cli("run", str(path), env={"HF_TOKEN": ""})
    assert result.rc == 0
    assert "warning: hf_token: the job uses Hugging Face but HF_TOKEN is not set" in result.err


def test_preflight_of_a_good_local_job_is_all_ok(cli_inproc, write):
    result = cli_inproc("preflight", str(write("launcher: none\ncommand: [true]\n")), "--json")
    assert result.rc == 0 and {c["status"] for c in result.json()["checks"]} == {"ok"}


def test_an_image_that_ships_without_python3_is_warned_for_in_job_steps(
    cli_inproc, write, tmp_path, lepton_server
):
    path = write(
        "image: nvcr.io/nvidia/cuda:12.4.0-base-ubuntu22.04\ncommand: [python3, train.py]\n"
        "checkpoint: {dir: /ckpt}\nlepton: {gpu_count: 1}\n"
    )
    # A workspace that answers: the API check is not what this test is about, and one that
    # cannot be reached costs the client's retries (seconds) on every call.
    with lepton_server.open(state_dir=tmp_path / "emulator", seed=7) as emulator:
        checks = cli_inproc("preflight", str(path), "--json", env=emulator.env()).json()["checks"]
        (check,) = [c for c in checks if c["name"] == "image_python"]
        assert check["status"] == "warn"
        assert (
            "nvcr.io/nvidia/cuda:12.4.0-base-ubuntu22.04 usually has no python3" in check["message"]
        )
        assert "resume step" in check["message"]
        path = write(
            "image: nvcr.io/nvidia/pytorch:25.08-py3\ncommand: [python3, train.py]\n"
            "checkpoint: {dir: /ckpt}\nlepton: {gpu_count: 1}\n"
        )
        checks = cli_inproc("preflight", str(path), "--json", env=emulator.env()).json()["checks"]
        assert [c["status"] for c in checks if c["name"] == "image_python"] == ["ok"]
