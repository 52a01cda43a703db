"""Rendering: the dry-run plan is the exact POST body, secrets are references, config
errors are one line with file, line and fix, and the env translation really works."""

from __future__ import annotations

import json
import subprocess

import pytest

from anylaunch.backends.lepton.names import job_name
from anylaunch.errors import ConfigError
from anylaunch.jobfile import loader
from anylaunch.node import rendezvous
from anylaunch.node.command import Torchrun
from anylaunch.node.script import NodeScript, render

SECRET = "hf_planted_secret_value_42"


def test_dry_run_json_is_the_exact_post_body_with_secrets_by_reference(lcli, write, home):
    path = write(
        """
        name: Train_Model.v2
        image: nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt
        command: dino train -e /tmp/spec.yaml
        launcher: none
        env:
          HF_TOKEN: ${HF_TOKEN}
          BATCH: 8
        lepton:
          gpu_count: 8
          num_nodes: 4
          dedicated_node_group: h100-pool
          priority_class: mid-4000
          shared_memory_size: 65536
        """
    )
    env = {"HF_TOKEN": SECRET, "NGC_KEY": "ngc-planted-key-77"}
    result = lcli("run", str(path), "--dry-run", "--json", env=env)
    assert result.rc == 0, result.err
    assert SECRET not in result.out + result.err and "ngc-planted" not in result.out
    out = result.json()
    body = out["plan"]["payload"]
    name = body["metadata"]["id"]
    assert name.startswith("train-model-v2-") and len(name) <= 36 and name == name.lower()
    spec = body["spec"]
    assert spec["resource_shape"] == "gpu.8xh100-sxm"  # resolved from gpu_count
    assert spec["affinity"] == {"allowed_dedicated_node_groups": ["ng-h100-pool-7x2k"]}
    assert spec["completions"] == spec["parallelism"] == 4 and spec["intra_job_communication"]
    assert spec["queue_config"] == {"priority_class": "mid-4000"}
    assert spec["mounts"] == [  # discovered: lustre over filestore, its first permitted prefix
        {
            "path": "/lustre/fsw/portfolios/edgeai",
            "from": "node-nfs:lustre",
            "mount_path": "/mnt/lustre",
        }
    ]
    envs = {e["name"]: e for e in spec["envs"]}
    assert envs["HF_TOKEN"] == {
        "name": "HF_TOKEN",
        "value_from": {"secret_name_ref": f"anylaunch-{out['plan']['job_id']}-hf-token"},
    }
    assert envs["WORLD_SIZE"]["value"] == "4" and envs["NUM_GPU_PER_NODE"]["value"] == "8"
    assert envs["BATCH"]["value"] == "8"
    assert spec["image_pull_secrets"] == ["anylaunch-ngc"]  # NGC_KEY -> pull secret for nvcr.io
    command = spec["container"]["command"]
    assert command[:2] == ["/bin/bash", "-c"]
    assert "\ndino train -e /tmp/spec.yaml\nANYLAUNCH_CMD\nexec bash -c" in command[2]
    assert "wget" not in command[2] and "curl" not in command[2]
    assert not (home / "jobs.db").exists() or SECRET.encode() not in (home / "jobs.db").read_bytes()
    assert emulator_jobs(lcli) == 0  # a dry run creates nothing


def emulator_jobs(lcli) -> int:
    return len(json.loads(lcli("ps", "--json").out))


def test_secrets_go_through_the_workspace_and_are_deleted_when_the_job_ends(
    lcli, write, home, emulator
):
    path = write(
        "image: python:3.11\ncommand: bash -c 'echo token=$HF_TOKEN'\nlauncher: none\n"
        "env:\n  HF_TOKEN: ${HF_TOKEN}\nlepton:\n  resource_shape: cpu.small\n"
    )
    result = lcli("run", str(path), "--json", env={"HF_TOKEN": SECRET})
    assert result.rc == 0, result.err
    job = result.json()
    assert f"token={SECRET}" in lcli("logs", job["id"]).out  # the replica got the value
    assert SECRET.encode() not in b"".join(p.read_bytes() for p in home.rglob("*") if p.is_file())
    (native,) = emulator.world.jobs.values()
    # The job read the value from a workspace secret made for it...
    assert native.secrets == {f"anylaunch-{job['id']}-hf-token": SECRET}
    # ...which is gone now that the job has ended: per-job secrets never pile up.
    assert emulator.world.secrets == {}


def script(command, pre=(), post=()) -> str:
    """A replica's script as the Lepton plan builds it: the translation first."""
    return render(
        NodeScript(
            command=command,
            launcher="none",
            torchrun=Torchrun(8),
            rendezvous=rendezvous.lepton(),
            pre=pre,
            post=post,
        )
    )


def test_arguments_reach_the_program_as_written_after_the_translation(tmp_path):
    text = script(
        ["bash", "-c", "for i in 1 2; do echo $i; done; echo $MASTER_ADDR", "it's"],
        pre=["echo pre"],
        post=["echo post rc"],
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "LEPTON_JOB_WORKER_PREFIX": "worker",
        "LEPTON_SUBDOMAIN": "myjob-job-svc",
        "LEPTON_JOB_TOTAL_WORKERS": "3",
        "LEPTON_JOB_WORKER_INDEX": "2",
    }
    fake = tmp_path / "show"
    fake.write_text(
        '#!/bin/bash\necho "$MASTER_ADDR $MASTER_PORT $NNODES $NODE_RANK $WORKER_ADDRS"\n'
    )
    fake.chmod(0o755)
    out = subprocess.run(["bash", "-c", text], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["pre", "1", "2", "worker-0.myjob-job-svc", "post rc"]
    shown = script([str(fake)])
    out = subprocess.run(["bash", "-c", shown], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == (
        "worker-0.myjob-job-svc 29400 3 2 worker-1.myjob-job-svc,worker-2.myjob-job-svc"
    )


@pytest.mark.parametrize(
    ("name", "job_id", "attempt", "expected"),
    [
        ("ddp-demo", "ab12cd34", 1, "ddp-demo-ab12cd34"),
        ("My_Big Run!!", "ab12cd34", 1, "my-big-run-ab12cd34"),
        ("9lives", "ab12cd34", 1, "job-9lives-ab12cd34"),
        ("x" * 60, "ab12cd34", 3, "x" * 24 + "-ab12cd34-r3"),
        (None, "ab12cd34", 1, "job-ab12cd34"),
    ],
)
def test_job_names_follow_lepton_rules_and_stay_unique(name, job_id, attempt, expected):
    assert job_name(name, job_id, attempt) == expected
    assert len(expected) <= 36


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        (
            "lepton:\n  gpu_cout: 8\n",
            ":4: lepton.gpu_cout: unknown key — did you mean 'gpu_count'?",
        ),
        (
            "lepton:\n  priority_class: mid-4000\n",
            ":3: lepton: priority_class needs dedicated_node_group",
        ),
        (
            "lepton:\n  priority_class: urgent\n",
            ":4: lepton.priority_class: 'urgent' is not allowed",
        ),
        ("lepton:\n  mounts: ['/a:/b']\n", ":4: lepton.mounts[0]: write 'PATH:MOUNT_PATH:VOLUME'"),
        (
            "lepton:\n  can_be_preempted: true\n",
            ":3: lepton: can_be_preempted needs dedicated_node_group",
        ),
        ("lepton:\n  can_preempt: false\n", ":3: lepton: can_preempt needs dedicated_node_group"),
        (
            "lepton:\n  env_vars:\n    LEPTON_JOB_NAME: x\n",
            ":4: lepton.env_vars: LEPTON_JOB_NAME is reserved by Lepton",
        ),
    ],
)
def test_bad_lepton_sections_are_one_line_errors_with_file_and_line(write, yaml_text, message):
    path = write("image: x\ncommand: t\n" + yaml_text)
    with pytest.raises(ConfigError) as caught:
        loader.load(path)
    assert "\n" not in caught.value.message
    assert caught.value.message.startswith(f"{path}{message}"), caught.value.message


def test_workspace_errors_name_the_key_and_the_choices(lcli, write):
    bad_group = write("image: x\ncommand: t\nlepton:\n  dedicated_node_group: a100-pool\n")
    result = lcli("run", str(bad_group), "--dry-run")
    assert result.rc == 2
    assert "lepton.dedicated_node_group: no node group 'a100-pool'" in result.err
    assert "h100-pool (ng-h100-pool-7x2k)" in result.err
    no_shape = write("image: x\ncommand: t\nlepton:\n  gpu_count: 3\n", "g.yaml")
    result = lcli("run", str(no_shape), "--dry-run")
    assert result.rc == 2 and "set lepton.resource_shape to one of:" in result.err
    lepton_uri = write(
        "image: x\ncommand: t\ninputs:\n  /data: lepton://bucket/x\nlepton:\n  resource_shape: cpu.small\n",
        "u.yaml",
    )
    result = lcli("run", str(lepton_uri), "--dry-run")
    assert result.rc == 2 and "lepton://" in result.err and "write s3://bucket/path" in result.err


def test_the_command_carries_the_in_job_runtime_and_never_imports_anylaunch(lcli, write):
    from anylaunch.node import runtime

    path = write(
        """
        image: nvcr.io/nvidia/pytorch:25.08-py3
        launcher: none
        command: [python3, train.py]
        inputs: {data: s3://bkt-a/train/}
        outputs: {results: s3://bkt-a/out/}
        checkpoint: {dir: /mnt/lustre/ckpt}
        lepton: {gpu_count: 8, dedicated_node_group: h100-pool}
        """
    )
    result = lcli("run", str(path), "--dry-run", "--json", "--no-preflight")
    assert result.rc == 0, result.err
    script = result.json()["plan"]["payload"]["spec"]["container"]["command"][2]
    assert "-m anylaunch" not in script and "anylaunch.storage" not in script
    assert (
        script.index(
            runtime.write_shell(
                "/tmp/anylaunch/anylaunch_job.pyz", "nvcr.io/nvidia/pytorch:25.08-py3", "resume"
            )
        )
        < script.index(" newest ")
        < script.index(" stage in ")
    )


def test_queue_config_always_carries_the_cli_default_priority(lcli, write):
    path = write(
        "image: x\ncommand: t\nlepton:\n  resource_shape: cpu.small\n"
        "  dedicated_node_group: h100-pool\n  can_be_preempted: true\n"
    )
    result = lcli("run", str(path), "--dry-run", "--json")
    assert result.rc == 0, result.err
    queue = result.json()["plan"]["payload"]["spec"]["queue_config"]
    assert queue == {"priority_class": "mid-4000", "can_be_preempted": True}


def test_a_reserved_env_name_is_a_config_error_with_file_and_line(lcli, write):
    path = write(
        "image: x\ncommand: t\nenv:\n  A: 1\n  LEPTON_WORKSPACE_ID: mine\n"
        "lepton:\n  resource_shape: cpu.small\n"
    )
    result = lcli("run", str(path), "--dry-run")
    assert result.rc == 2 and "Traceback" not in result.err
    assert f"{path}:5: env.LEPTON_WORKSPACE_ID: LEPTON_WORKSPACE_ID is reserved" in result.err
    result = lcli("run", str(path), "--backend", "lepton", "--dry-run")  # routed, no section
    assert result.rc == 2 and f"{path}:5: env.LEPTON_WORKSPACE_ID" in result.err


def test_the_shape_id_is_the_metadata_id_not_the_display_name(lcli, write):
    from anylaunch.backends.lepton.rest import wire

    shape = wire.Shape.model_validate(
        {"metadata": {"id": "gpu.8xh100-sxm"}, "spec": {"name": "H100 SXM x8"}}
    )
    assert shape.shape_id == "gpu.8xh100-sxm"
    # The emulator's GPU shapes have display names that differ from their ids, so a
    # client that sends the name is refused; the plan resolves gpu_count to the id.
    path = write("image: x\ncommand: t\nlepton:\n  gpu_count: 4\n")
    result = lcli("run", str(path), "--dry-run", "--json")
    assert result.rc == 0, result.err
    assert result.json()["plan"]["payload"]["spec"]["resource_shape"] == "gpu.4xh100-sxm"


def test_what_the_plan_infers_is_labelled_a_guess_in_the_dry_run(lcli, write):
    # The API says a volume is nfs, never which filesystem, and the official SDK has no
    # call that makes an image pull secret: both are shown as guesses, never as facts.
    path = write(
        "image: nvcr.io/nvidia/pytorch:25.08-py3\ncommand: train\nlauncher: none\n"
        "lepton: {gpu_count: 8, dedicated_node_group: h100-pool}\n"
    )
    env = {"NGC_KEY": "ngc-planted-key-77"}
    guesses = lcli("run", str(path), "--dry-run", "--json", env=env).json()["plan"]["guesses"]
    assert len(guesses) == 2
    assert "node-nfs:lustre" in guesses[0] and "by its name" in guesses[0]
    assert "anylaunch-ngc" in guesses[1] and "unverified" in guesses[1]
    text = lcli("run", str(path), "--dry-run", env=env).out
    assert text.count("# guess: ") == 2
    chosen = write(
        "image: python:3.12\ncommand: train\nlauncher: none\nlepton:\n  gpu_count: 8\n"
        "  dedicated_node_group: h100-pool\n  mounts: ['/data:/mnt/data:lustre']\n"
    )
    assert lcli("run", str(chosen), "--dry-run", "--json").json()["plan"]["guesses"] == []
