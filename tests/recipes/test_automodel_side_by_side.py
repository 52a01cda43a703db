"""The Slurm, SkyPilot-spot and nsys blocks of AutoModel's launcher documentation, rendered
by anylaunch beside what AutoModel's own launcher makes of them, field for field.

AutoModel's sbatch template is automodel_template.py (copied from NeMo AutoModel, see
automodel/README.md); its command, nsys options and SkyPilot task are restated from
`_cli/app.py` and `skypilot/utils.py` of the same commit. Every difference is listed
here and in README.md (the AutoModel section); a new one fails these tests.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import yaml
from automodel_template import render_script

from anylaunch import api
from anylaunch.jobfile import loader
from anylaunch.store import Store
from automodel_docs import SKYPILOT_BLOCK, SLURM_BLOCK, SPOT_RECIPE

SECRETS = {"HF_TOKEN": "hf_side_by_side_1", "WANDB_API_KEY": "wandb_side_by_side_1"}
RECIPE = "recipe: TrainFinetuneRecipeForNextTokenPrediction\nstep_scheduler:\n  checkpoint_interval: 100\n"
COMMAND = ["python", "-m", "nemo_automodel.recipes.llm.train_ft", "-c", "{config}"]

# The launcher documentation's nsys block, verbatim (the others: automodel_docs).
NSYS_BLOCK = """\
slurm:
  job_name: llm_profile
  nodes: 1
  ntasks_per_node: 8
  time: "00:30:00"
  account: my_account
  partition: batch
  container_image: nvcr.io/nvidia/nemo:dev
  nsys_enabled: true
"""

# Directives where anylaunch differs from AutoModel on purpose: (AutoModel's, ours).
SBATCH_DIFFERENCES = {
    # AutoModel asks for one task per node and starts torchrun in it; anylaunch asks for
    # one task per rank (so Slurm accounts the ranks) and starts one torchrun per node.
    "--ntasks-per-node": ("1", "8"),
    # anylaunch writes every node's output into the job's logs/ folder, which logs reads.
    "--output": ("JOB_DIR/slurm_%x_%j.out", "JOB_DIR/logs/node-0.log"),
}
# What anylaunch adds: the working directory, appended logs on requeue, the early signal
# before the time limit, requeue after preemption, and its own job id for reconciling.
SBATCH_ADDITIONS = {"--chdir", "--open-mode", "--signal", "--requeue", "--comment"}
_LONG = {"-A": "--account", "-p": "--partition", "-N": "--nodes", "-J": "--job-name"}


def _directives(script: str, job_dir: str) -> dict[str, str]:
    out = {}
    for line in script.splitlines():
        if not line.startswith("#SBATCH "):
            continue
        option = line.removeprefix("#SBATCH ").replace(job_dir, "JOB_DIR")
        flag, _, value = option.replace("=", " ", 1).partition(" ")
        out[_LONG.get(flag, flag)] = shlex.split(value)[0] if value else ""
    return out


def _exported(script: str, names: list[str]) -> dict[str, str]:
    """The values the script's `export NAME=...` lines give, as bash evaluates them."""
    wanted = re.compile(f"export ({'|'.join(names)})=")
    lines = [ln for ln in script.splitlines() if wanted.match(ln)]
    probe = "; ".join([*lines, *(f'printf "%s\\0" "${{{n}-<unset>}}"' for n in names)])
    done = subprocess.run(
        ["bash", "-c", probe], env={"HOME": "/home/u"}, capture_output=True, text=True
    )
    return dict(zip(names, done.stdout.split("\0"), strict=False))


def _automodel_sbatch(block: str, job_dir: str) -> str:
    """What AutoModel's launcher writes for a recipe with this slurm: block (app.py fills
    the defaults of its SlurmConfig, then template.render_script)."""
    section = yaml.safe_load(block)["slurm"]
    opts = {
        "job_name": "",
        "nodes": 1,
        "ntasks_per_node": 8,
        "time": "00:05:00",
        "account": None,
        "partition": "batch",
        "container_image": "nvcr.io/nvidia/nemo:dev",
        "hf_home": str(Path(job_dir).parent / ".hf_home"),
        "master_port": 13742,
        "gpus_per_node": None,
        "wandb_key": "",
        "hf_token": "",
        "env_vars": {},
        "command": "true",
        "chdir": "/opt/Automodel",
        "nsys_enabled": False,
        **{k: v for k, v in section.items() if k != "extra_mounts"},
        "container_mounts": ",".join(
            f"{m['source']}:{m['dest']}" for m in section.get("extra_mounts", [])
        ),
    }
    return render_script(opts, job_dir)


def _ours(tmp_path: Path, block: str, recipe: str = RECIPE, backend: str = "slurm") -> dict:
    path = tmp_path / "recipe.yaml"
    path.write_text(recipe + block)
    spec = loader.load(path, environ=SECRETS).model_copy(update={"command": list(COMMAND)})
    return api.dry_run(spec, backend, store=Store(tmp_path / "home")).model_dump(mode="json")


def test_slurm_block_gives_automodels_sbatch_directives(tmp_path: Path) -> None:
    plan = _ours(tmp_path, SLURM_BLOCK)
    ours = _directives(plan["payload"]["script"], plan["job_dir"])
    theirs = _directives(_automodel_sbatch(SLURM_BLOCK, "/jobs/1700000000"), "/jobs/1700000000")
    assert theirs["--exclusive"] == "" and theirs["--mail-type"] == "FAIL"
    for flag, value in theirs.items():
        if flag in SBATCH_DIFFERENCES:
            assert (value, ours[flag]) == SBATCH_DIFFERENCES[flag], flag
        else:
            assert ours.get(flag) == value, (
                f"{flag}: AutoModel {value!r}, anylaunch {ours.get(flag)!r}"
            )
    assert set(ours) - set(theirs) == SBATCH_ADDITIONS


def test_slurm_block_exports_automodels_environment_and_no_secret(tmp_path: Path) -> None:
    plan = _ours(tmp_path, SLURM_BLOCK)
    script = plan["payload"]["script"]
    theirs_script = _automodel_sbatch(SLURM_BLOCK, "/jobs/1700000000")
    names = [
        "MASTER_PORT",
        "CUDA_DEVICE_MAX_CONNECTIONS",
        "TORCH_NCCL_AVOID_RECORD_STREAMS",
        "NCCL_NVLS_ENABLE",
        "HF_HOME",
    ]
    assert _exported(script, names) == _exported(theirs_script, names)
    # WORLD_SIZE: AutoModel's is NUM_GPUS * SLURM_NNODES = 8 * 2, written as arithmetic.
    assert "export WORLD_SIZE=16" in script
    # AutoModel writes the secrets' values into the script (export HF_TOKEN=...);
    # anylaunch names them only, and sbatch passes them on from the submit environment.
    text = str(plan)
    assert all(secret not in text for secret in SECRETS.values())
    assert set(plan["secret_env"]) == set(SECRETS)


def test_nsys_block_profiles_with_automodels_options(tmp_path: Path) -> None:
    plan = _ours(tmp_path, NSYS_BLOCK)
    line = next(ln for ln in plan["payload"]["script"].splitlines() if "nsys profile" in ln)
    ours = shlex.split(line.split("nsys profile", 1)[1])
    # AutoModel's options (app.py), less its report name and --force-overwrite spelling.
    theirs = [
        "-s", "none", "--trace=cuda,cudnn,nvtx", "--cudabacktrace=all",
        "--cuda-graph-trace=node", "--python-backtrace=cuda", "--wait", "all",
        "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
    ]  # fmt: skip
    start = ours.index(theirs[0])
    assert ours[start : start + len(theirs)] == theirs
    # Differences: anylaunch names the report per node in the job's nsys/ folder
    # (AutoModel: JOB_DIR/automodel_profile_%p.nsys-rep) and writes --force-overwrite=true.
    assert ours[0] == "-o" and "/nsys/" in ours[1] and ours[2] == "--force-overwrite=true"
    assert _directives(plan["payload"]["script"], plan["job_dir"])["--time"] == "00:30:00"


def test_skypilot_spot_block_gives_automodels_task(tmp_path: Path) -> None:
    plan = _ours(tmp_path, SKYPILOT_BLOCK, recipe=SPOT_RECIPE, backend="skypilot")
    task = plan["payload"]["task"]
    # AutoModel's sky.Task for this block (skypilot/utils.py): num_nodes 2; resources
    # cloud aws, region us-east-1, H100:8, use_spot, disk 200; setup as written;
    # envs HF_TOKEN (its value) and HF_HOME ~/.cache/huggingface; workdir ".".
    assert task["num_nodes"] == 2
    resources = task["resources"]
    assert resources["infra"] == "aws/us-east-1" and resources["accelerators"] == "H100:8"
    assert resources["use_spot"] is True and resources["disk_size"] == 200
    assert task["setup"] == "pip install nemo-automodel"
    assert task["envs"]["HF_HOME"] == "~/.cache/huggingface"
    # Differences: the token is a SkyPilot secret (not a plain env value), the local
    # folder is not synced unless workdir: says so, spot runs as a managed job with the
    # checkpoint folder on a bucket, and the name is the job's, not `llm_finetune`.
    # WANDB_API_KEY comes from the submitting environment, as AutoModel's wandb_key does.
    assert task["secrets"] == {"HF_TOKEN": None, "WANDB_API_KEY": None}
    assert "HF_TOKEN" not in task["envs"]
    assert "workdir" not in task
    assert plan["payload"]["mode"] == "managed"
    assert all(secret not in str(plan) for secret in SECRETS.values())
