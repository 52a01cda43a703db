"""The gallery in examples/, tested: every job file there dry-runs on its backend, and the
ones this machine can run (the frameworks on local CPU, splits with retry, DDP on the
devstack Slurm cluster, the workflow across local and Slurm) run and succeed.

A job file added to examples/ without a dry-run check here fails
`test_every_example_is_dry_run`.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers import free_port

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PY = sys.executable
# What a rehearsal of a GPU example on the devstack asks for: 2 of the stand-in GPUs of
# each devstack node, so 2 ranks per node. The CPU examples (examples/frameworks/,
# ddp_demo.yaml) say `ranks_per_node` themselves.
CPU_RANKS = ["--set", "gpus_per_node=2"]


def run_env(**extra: str) -> dict[str, str]:
    """This venv's interpreter and tools first on PATH: `python`, `accelerate` and
    `torchrun` in a command line are the ones a user of this checkout has."""
    return {"PATH": f"{Path(PY).parent}{os.pathsep}{os.environ['PATH']}", **extra}


# -- dry runs: what each example's plan must show ---------------------------------------------


def payload(out: dict[str, Any]) -> Any:
    return out["plan"]["payload"]


def local_nodes(nodes: int, ranks: int, script: str) -> Callable[[dict[str, Any]], None]:
    def check(out: dict[str, Any]) -> None:
        assert out["backend"] == "local"
        shown = payload(out)["nodes"]
        assert [n["node_rank"] for n in shown] == list(range(nodes))
        for node in shown:
            text = " ".join(node["argv"])
            assert script in text
            assert f"--nproc-per-node {ranks}" in text or node["env"]["NUM_GPU_PER_NODE"] == str(
                ranks
            )

    return check


def sbatch(out: dict[str, Any]) -> str:
    assert out["backend"] == "slurm"
    return payload(out)["script"]


def slurm_torchrun(out: dict[str, Any]) -> None:
    script = sbatch(out)
    for line in ("--nodes=2", "--ntasks-per-node=8", "--gpus-per-node=8", "--time=04:00:00"):
        assert f"#SBATCH {line}\n" in script
    assert "--nproc-per-node 8" in script and "ddp_demo.py --steps 2000" in script


def slurm_srun_pyxis(out: dict[str, Any]) -> None:
    script = sbatch(out)
    [step] = [line for line in script.splitlines() if "--container-image=" in line]
    assert (
        "--ntasks-per-node=8" in step
        and "'--container-image=nvcr.io#nvidia/pytorch:25.08-py3'" in step
    )
    assert ":/checkpoints," in step  # the extra mount
    assert 'export RANK="$SLURM_PROCID" LOCAL_RANK="$SLURM_LOCALID"' in script  # a task per rank


def skypilot_spot(out: dict[str, Any]) -> None:
    assert out["backend"] == "skypilot"
    plan = payload(out)
    task = plan["task"]
    assert plan["mode"] == "managed" and task["num_nodes"] == 2
    assert task["resources"]["use_spot"] is True and task["resources"]["accelerators"] == "H100:8"
    assert task["file_mounts"]["/checkpoints"]["source"] == "s3://my-checkpoints/ddp-spot"
    assert "ANYLAUNCH_RESUME_FROM" in task["run"]


def lepton_tao(out: dict[str, Any]) -> None:
    assert out["backend"] == "lepton"
    spec = payload(out)["spec"]
    assert spec["resource_shape"] == "gpu.8xh100-sxm"  # from gpu_count: 8
    assert spec["completions"] == spec["parallelism"] == 4 and spec["intra_job_communication"]
    assert [m["from"] for m in spec["mounts"]] == ["node-nfs:lustre"]  # lustre over filestore
    envs = {e["name"]: e for e in spec["envs"]}
    assert envs["WORLD_SIZE"]["value"] == "4" and envs["NUM_GPU_PER_NODE"]["value"] == "8"
    assert "value_from" in envs["CLOUD_METADATA"]  # S3 credentials travel as a secret
    command = spec["container"]["command"][2]
    assert '"cache_root": "/mnt/lustre"' in command  # the S3 input is cached on Lustre
    assert "s3://bucket/coco/train.json" in command and "dino train -e /tmp/spec.yaml" in command


def workflow(out: dict[str, Any]) -> None:
    assert out["order"] == ["rehearse", "train", "evaluate"]
    steps = {s["id"]: s for s in out["steps"]}
    assert [steps[s]["plan"]["backend"] for s in out["order"]] == ["local", "slurm", "local"]
    [handoff] = steps["evaluate"]["handoffs"]
    assert (handoff["input"], handoff["via"]) == ("trained", "s3")


def splits_retry(out: dict[str, Any]) -> None:
    local_nodes(1, 1, "eval_split.py")(out)


def automodel(out: dict[str, Any]) -> None:
    script = sbatch(out)
    assert "#SBATCH --account=my_account\n" in script and "#SBATCH --exclusive\n" in script
    assert "-m nemo_automodel.recipes.llm.train_ft -c" in script
    assert "HF_TOKEN" in out["plan"]["secret_env"]


# Every job file under examples/, with the check of its dry-run.
CHECKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "ddp_demo.yaml": local_nodes(2, 2, "ddp_demo.py"),
    "slurm_torchrun.yaml": slurm_torchrun,
    "slurm_srun_pyxis.yaml": slurm_srun_pyxis,
    "skypilot_spot.yaml": skypilot_spot,
    "lepton_tao.yaml": lepton_tao,
    "workflow.yaml": workflow,
    "splits_retry.yaml": splits_retry,
    "automodel/llama3_2_1b_squad_slurm.yaml": automodel,
    "frameworks/lightning.yaml": local_nodes(2, 1, "lightning_train.py"),
    "frameworks/accelerate.yaml": local_nodes(2, 1, "accelerate launch"),
    "frameworks/hf_trainer.yaml": local_nodes(2, 1, "hf_trainer_train.py"),
    "frameworks/torch_elastic.yaml": local_nodes(2, 2, "--rdzv-backend=c10d"),
}
# Dry-run with a Lepton workspace (the emulator's): test_lepton_example_dry_runs.
LEPTON = "lepton_tao.yaml"
HF_SECRET = "hf_examples_secret_value_19"
S3_SECRET = "s3_examples_secret_value_23"
DRY_ENV = {
    "HF_TOKEN": HF_SECRET,
    "S3_BUCKET_NAME": "examples-bucket",
    "S3_ENDPOINT_URL": "http://127.0.0.1:9",
    "ACCESS_KEY": "examples-access-key",
    "SECRET_KEY": S3_SECRET,
}


def test_every_example_is_dry_run():
    found = {str(p.relative_to(EXAMPLES)) for p in EXAMPLES.rglob("*.yaml")}
    assert found == set(CHECKS), (
        f"examples without a dry-run check here: {sorted(found - set(CHECKS))};"
        f" checks for files that are gone: {sorted(set(CHECKS) - found)}"
    )


@pytest.mark.parametrize("example", sorted(set(CHECKS) - {LEPTON}))
def test_example_dry_runs(cli_inproc, example):
    if example == "skypilot_spot.yaml":
        pytest.importorskip("sky", reason="the skypilot extra validates the task")
    result = cli_inproc("run", str(EXAMPLES / example), "--dry-run", "--json", env=DRY_ENV)
    assert result.rc == 0, result.out + result.err
    assert HF_SECRET not in result.out and S3_SECRET not in result.out
    CHECKS[example](result.json())


def test_lepton_example_dry_runs_on_the_workspaces_node_group(cli_inproc, lepton_server, tmp_path):
    # The example names the node group as the TAO SDK's documentation does (my-h100-pool);
    # the emulated workspace's is h100-pool, and the error says so.
    path = str(EXAMPLES / LEPTON)
    with lepton_server.open(state_dir=tmp_path / "emulator", seed=7) as emulator:
        env = {**emulator.env(), **DRY_ENV}
        wrong = cli_inproc("run", path, "--dry-run", env=env)
        assert wrong.rc == 2 and "no node group 'my-h100-pool'" in wrong.err
        assert "use one of: h100-pool" in wrong.err
        result = cli_inproc(
            "run", path, "--dry-run", "--json", "--set", "lepton.dedicated_node_group=h100-pool",
            env=env,
        )  # fmt: skip
        assert result.rc == 0, result.out + result.err
        assert S3_SECRET not in result.out
        CHECKS[LEPTON](result.json())
        assert len(emulator.world.jobs) == 0  # a dry run creates nothing


# -- runs: the examples this machine can run ----------------------------------------------------


def run_example(cli, example: str, *args: str, env: dict[str, str], timeout: float = 300):
    result = cli("run", str(EXAMPLES / example), "--json", *args, env=env, timeout=timeout)
    assert result.rc == 0, result.out + result.err[-3000:]
    job = result.json()
    assert (job["state"], job["exit_code"]) == ("SUCCEEDED", 0)
    return job, cli("logs", job["id"], env=env).out


# Lightning, Accelerate and the HF Trainer each train for 20-40 s on two cores: the
# examples' dry-runs above are in the default run, their trainings in `-m slow`.
@pytest.mark.slow
def test_lightning_example_trains_with_ddp_on_two_local_nodes(cli, torch, tmp_path):
    pytest.importorskip("lightning")
    _, logs = run_example(
        cli, "frameworks/lightning.yaml", env=run_env(LIGHTNING_ROOT=str(tmp_path))
    )
    assert "Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2" in logs
    assert re.search(r"\[node 0\] lightning: world_size=2 epochs=3 train_loss=\d", logs), logs


@pytest.mark.slow
def test_accelerate_example_launches_two_processes_on_two_local_nodes(cli, torch):
    pytest.importorskip("accelerate")
    _, logs = run_example(cli, "frameworks/accelerate.yaml", env=run_env())
    for node in (0, 1):  # each node's main process prints; both saw the same gathered loss
        assert f"[node {node}] accelerate: epoch 3 loss" in logs and "processes=2" in logs
    last = re.findall(r"\[node \d\] accelerate: epoch 3 loss (\S+)", logs)
    assert len(set(last)) == 1, logs


@pytest.mark.slow
def test_hf_trainer_example_trains_with_ddp_on_two_local_nodes(cli, torch, tmp_path):
    pytest.importorskip("transformers")
    _, logs = run_example(
        cli, "frameworks/hf_trainer.yaml", env=run_env(HF_TRAINER_OUT=str(tmp_path))
    )
    assert re.search(r"\[node 0\] hf-trainer: world_size=2 steps=20 train_loss=\d", logs), logs


@pytest.mark.slow  # a c10d rendezvous of 4 ranks: about 25 s; the dry-run above is in the default run
def test_torch_elastic_example_rendezvous_over_c10d_on_two_local_nodes(cli, torch, tmp_path):
    _, logs = run_example(
        cli, "frameworks/torch_elastic.yaml", env=run_env(ELASTIC_CKPT=str(tmp_path))
    )
    ranks = re.findall(r"rank=(\d) local_rank=\d node_rank=\d world_size=4", logs)
    assert sorted(ranks) == ["0", "1", "2", "3"], logs
    assert (tmp_path / "latest.pt").exists() and "at step 20" in logs


def test_splits_example_retries_only_the_split_that_failed(cli, tmp_path):
    gallery = tmp_path / "examples"
    shutil.copytree(EXAMPLES, gallery)
    (gallery / "eval-data" / "ja.txt").rename(tmp_path / "ja.txt")  # split 3's data is missing
    path = str(gallery / "splits_retry.yaml")
    env = run_env()
    first = cli("run", path, "--json", env=env)
    assert first.rc == 1, first.out + first.err
    run = first.json()
    assert [s["state"] for s in run["splits"]] == ["SUCCEEDED"] * 3 + ["FAILED"]
    failed = run["splits"][3]["attempts"][0]["id"]
    assert "no data for ja" in cli("logs", failed, env=env).out

    (tmp_path / "ja.txt").rename(gallery / "eval-data" / "ja.txt")
    retried = cli("retry", run["id"], "--failed", "--json", env=env)
    assert retried.rc == 0, retried.out + retried.err
    after = retried.json()
    assert after["state"] == "SUCCEEDED"
    assert [len(s["attempts"]) for s in after["splits"]] == [1, 1, 1, 2]
    again = after["splits"][3]["attempts"][1]["id"]
    assert "eval ja: 3 lines" in cli("logs", again, env=env).out


@pytest.fixture
def slurm_env(devstack) -> dict[str, str]:
    return run_env(SLURM_CONF=devstack["SLURM_CONF"])


def test_slurm_torchrun_example_runs_on_two_devstack_nodes(
    cli_inproc, slurm_env, leave_no_job_behind, torch, tmp_path
):
    # The example's 2 nodes and its sbatch script as written; 2 ranks on each node's CPU
    # instead of 8 GPUs, and fewer steps.
    job, logs = run_example(
        cli_inproc,
        "slurm_torchrun.yaml",
        *CPU_RANKS,
        "--set", f"slurm.python={PY}",
        "--set", f"slurm.master_port={free_port()}",
        "--", "python", "ddp_demo.py", "--steps", "20", "--save-every", "10",
        "--checkpoint-dir", str(tmp_path / "ckpt"),
        env=slurm_env,
    )  # fmt: skip
    assert job["backend"] == "slurm"
    nodes = set(re.findall(r"anylaunch: task \d, node (\d) of 2 on (n\d)", logs))
    assert nodes == {("0", "n1"), ("1", "n2")}, logs
    assert len(re.findall(r"rank=\d local_rank=\d node_rank=\d world_size=4", logs)) == 4
    assert "saved checkpoint" in logs and (tmp_path / "ckpt" / "latest.pt").exists()


@pytest.mark.slow  # four steps on two backends, about 30 s; its dry-run is above
def test_workflow_example_runs_across_local_and_devstack_slurm(
    cli, slurm_env, leave_no_job_behind, bucket, cli_env, torch, tmp_path
):
    gallery = tmp_path / "examples"
    shutil.copytree(EXAMPLES, gallery)
    # A workflow takes no --set: the copy says what a CPU rehearsal on the devstack needs.
    path = gallery / "workflow.yaml"
    flow = yaml.safe_load(path.read_text())
    flow["slurm"].update(python=PY, master_port=free_port())
    flow["steps"]["train"]["gpus_per_node"] = 2
    flow["steps"]["train"]["command"] = "python ddp_demo.py --steps 20 --checkpoint-dir ckpt"
    path.write_text(yaml.safe_dump(flow, sort_keys=False))
    env = {**cli_env, **slurm_env, "S3_BUCKET_NAME": bucket, "ANYLAUNCH_WORKFLOW_POLL_S": "0.5"}

    done = cli("run", str(path), "--json", env=env, timeout=600)
    assert done.rc == 0, done.out + done.err[-3000:]
    wf = done.json()
    assert wf["state"] == "SUCCEEDED"
    steps = {s["id"]: s for s in wf["steps"]}
    train = cli("logs", steps["train"]["splits"][0]["attempts"][0]["id"], env=env).out
    assert "on n1" in train and "on n2" in train and "saved checkpoint ckpt/latest.pt" in train
    evaluate = cli("logs", steps["evaluate"]["splits"][0]["attempts"][0]["id"], env=env).out
    assert re.search(r"evaluate: checkpoint at step 20 has held-out loss \d", evaluate), evaluate
