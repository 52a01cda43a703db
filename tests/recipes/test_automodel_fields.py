"""AutoModel's launcher fields in `slurm:` and `skypilot:` mean what they mean there, and
AutoModel's defaults apply to AutoModel recipes only, never over what the user wrote."""

from __future__ import annotations

import json
from pathlib import Path

from anylaunch import api
from anylaunch.backends.slurm import preflight as slurm_preflight
from anylaunch.jobfile import loader
from anylaunch.store import Store

SECRETS = {"HF_TOKEN": "hf_fields_secret_1", "WANDB_API_KEY": "wandb_fields_secret_1"}
AUTOMODEL = "recipe: TrainFinetuneRecipeForNextTokenPrediction\n"


def _load(tmp_path: Path, text: str):
    path = tmp_path / "recipe.yaml"
    path.write_text(text)
    spec = loader.load(path, environ=SECRETS)
    return spec.model_copy(update={"command": ["python", "train.py", "-c", "{config}"]})


def _plan(tmp_path: Path, text: str, backend: str) -> dict:
    spec = _load(tmp_path, text)
    return api.dry_run(spec, backend, store=Store(tmp_path / "home")).model_dump(mode="json")


def test_slurm_credentials_travel_as_secrets_and_are_masked_in_the_store(tmp_path) -> None:
    text = AUTOMODEL + "slurm:\n  hf_token: ${HF_TOKEN}\n  wandb_key: ${WANDB_API_KEY}\n"
    spec = _load(tmp_path, text)
    assert spec.slurm.secret_env() == SECRETS
    stored = json.dumps(spec.redacted())
    plan = _plan(tmp_path, text, "slurm")
    for value in SECRETS.values():
        assert value not in stored and value not in json.dumps(plan)
    assert set(plan["secret_env"]) == set(SECRETS)


def test_skypilot_credentials_and_gpus_per_node(tmp_path) -> None:
    text = (
        AUTOMODEL + "skypilot:\n  cloud: aws\n  accelerators: H100:8\n  gpus_per_node: 4\n"
        "  hf_token: ${HF_TOKEN}\n  job_dir: /tmp/skyjobs\n"
    )
    plan = _plan(tmp_path, text, "skypilot")
    task = plan["payload"]["task"]
    assert task["secrets"] == {"HF_TOKEN": None, "WANDB_API_KEY": None}
    assert "--nproc-per-node 4" in task["run"]
    assert all(value not in json.dumps(plan) for value in SECRETS.values())


def test_repo_root_chdir_and_job_dir(tmp_path) -> None:
    text = AUTOMODEL + (
        f"slurm:\n  repo_root: /opt/Automodel\n  job_dir: {tmp_path}/jobs\n"
        "  container_image: nvcr.io/nvidia/nemo:dev\n"
    )
    plan = _plan(tmp_path, text, "slurm")
    script = plan["payload"]["script"]
    assert "#SBATCH --chdir=/opt/Automodel" in script
    assert "export PYTHONPATH=/opt/Automodel${PYTHONPATH:+:$PYTHONPATH}" in script
    assert "/opt/Automodel:/opt/Automodel" in script
    assert plan["job_dir"].startswith(f"{tmp_path}/jobs/")
    chdir = _load(tmp_path, "slurm:\n  chdir: /work/here\n")
    assert chdir.slurm.workdir == "/work/here"


def test_automodel_defaults_only_for_recipes_and_never_over_the_user(tmp_path) -> None:
    plain = _plan(tmp_path, "slurm: {nodes: 1}\n", "slurm")["payload"]["script"]
    assert "--exclusive" not in plain and "CUDA_DEVICE_MAX_CONNECTIONS" not in plain
    recipe = _plan(tmp_path, AUTOMODEL + "slurm: {nodes: 1}\n", "slurm")["payload"]["script"]
    assert "#SBATCH --exclusive" in recipe and "#SBATCH --mail-type=FAIL" in recipe
    assert "export CUDA_DEVICE_MAX_CONNECTIONS=1" in recipe
    own = AUTOMODEL + (
        "slurm:\n  exclusive: false\n  sbatch_lines: ['--mail-type=END']\n"
        "  env_vars: {NCCL_NVLS_ENABLE: '1'}\n"
    )
    mine = _plan(tmp_path, own, "slurm")["payload"]["script"]
    assert "--exclusive" not in mine and "--mail-type=FAIL" not in mine
    assert "export NCCL_NVLS_ENABLE=1" in mine and "NCCL_NVLS_ENABLE=0" not in mine


def test_mounts_without_an_image_are_a_warning(tmp_path) -> None:
    spec = _load(tmp_path, "slurm:\n  extra_mounts: ['/data:/data']\n")
    checks = [c for c in slurm_preflight.spec_checks(spec) if c.name == "mounts"]
    assert [c.status for c in checks] == ["warn"]
    with_image = _load(tmp_path, "image: x\nslurm:\n  extra_mounts: ['/data:/data']\n")
    assert not [c for c in slurm_preflight.spec_checks(with_image) if c.name == "mounts"]


def test_slurm_job_dir_holds_the_job_and_logs_read_it(cli_inproc, tmp_path, devstack, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", devstack["SLURM_CONF"])
    path = tmp_path / "recipe.yaml"
    path.write_text(AUTOMODEL + f"slurm:\n  job_dir: {tmp_path}/jobs\n")
    done = cli_inproc(
        "run", str(path), "--json", "--set", "launcher=none", "--", "echo", "hello from job_dir",
        timeout=180,
    )  # fmt: skip
    assert done.rc == 0, done.err[-2000:]
    job = done.json()
    assert (job["backend"], job["state"]) == ("slurm", "SUCCEEDED")
    assert (tmp_path / "jobs" / job["id"] / "sbatch.sh").is_file()
    logs = cli_inproc("logs", job["id"])
    assert "hello from job_dir" in logs.out


def test_a_recipe_without_a_command_runs_the_module_it_names(tmp_path) -> None:
    path = tmp_path / "recipe.yaml"
    path.write_text(AUTOMODEL)
    assert loader.load(path, environ={}).command == [
        "python", "-m", "nemo_automodel.recipes.llm.train_ft", "-c", "{config}",
    ]  # fmt: skip
    path.write_text(
        "recipe:\n  _target_: nemo_automodel.recipes.vlm.finetune.FinetuneRecipeForVLM\n"
    )
    assert loader.load(path, environ={}).command[2] == "nemo_automodel.recipes.vlm.finetune"
    path.write_text(AUTOMODEL + "command: python mine.py -c {config}\n")
    assert loader.load(path, environ={}).command == "python mine.py -c {config}"  # a shell line
    path.write_text("recipe: SomeFutureRecipe\n")  # unknown short name: nothing guessed
    assert loader.load(path, environ={}).command == []
