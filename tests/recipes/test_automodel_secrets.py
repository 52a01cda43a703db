"""An AutoModel recipe that names secrets in its body runs with them, on this machine and
on the devstack's Slurm cluster: the program reads its recipe back as written (key types,
merge keys, its own references), resolves the secrets from its environment, and no file
under ANYLAUNCH_HOME (plans, scripts, the recipe file, logs, the store) holds a value."""

from __future__ import annotations

import json
import sys
from pathlib import Path

PROGRAM = Path(__file__).parent / "programs" / "read_recipe.py"
PLANTED = {"WANDB_API_KEY": "wandb_planted_5b1e0c93", "HF_TOKEN": "hf_planted_0d7c41aa"}
RECIPE = """\
recipe: TrainFinetuneRecipeForNextTokenPrediction
defaults: &defaults {lr: 1.0e-5, weight_decay: 0}
optim:
  <<: *defaults
  lr: 2.0e-5
0: zero
on: {push: true}
wandb:
  key: ${WANDB_API_KEY}
  project: ${oc.env:WANDB_PROJECT,automodel}
model:
  token: ${oc.env:HF_TOKEN}
"""


def _run(cli, tmp_path: Path, extra: str, backend: str) -> dict:
    path = tmp_path / "recipe.yaml"
    path.write_text(RECIPE + extra)
    report = tmp_path / "report.json"
    result = cli(
        "run", str(path), "--json", "--set", "launcher=none", "--backend", backend,
        "--", sys.executable, str(PROGRAM), "{config}", str(report),
        env=PLANTED, timeout=180,
    )  # fmt: skip
    assert result.rc == 0, result.err[-2000:]
    assert (result.json()["backend"], result.json()["state"]) == (backend, "SUCCEEDED")
    for value in PLANTED.values():
        assert value not in result.out + result.err
    return json.loads(report.read_text())


def _no_value_under(home: Path) -> None:
    for file in home.rglob("*"):
        if file.is_file():
            data = file.read_bytes()
            for name, value in PLANTED.items():
                assert value.encode() not in data, f"{name} in {file}"


def _read_back_as_written(report: dict) -> None:
    assert report["keys"] == [
        ["str", "recipe"], ["str", "defaults"], ["str", "optim"], ["int", "0"],
        ["bool", "True"], ["str", "wandb"], ["str", "model"],
    ]  # fmt: skip
    assert report["optim"] == {"lr": 2.0e-5, "weight_decay": 0}
    assert report["raw"] == {"wandb_key": "${WANDB_API_KEY}", "token": "${oc.env:HF_TOKEN}"}
    assert report["resolved_lengths"] == {
        "wandb_key": len(PLANTED["WANDB_API_KEY"]),
        "token": len(PLANTED["HF_TOKEN"]),
    }


def test_recipe_secrets_reach_a_local_job_and_no_file(cli, home, tmp_path) -> None:
    report = _run(cli, tmp_path, "", "local")
    _read_back_as_written(report)
    _no_value_under(home)


def test_recipe_secrets_reach_a_slurm_job_and_no_file(
    cli_inproc, home, tmp_path, devstack, monkeypatch
) -> None:
    monkeypatch.setenv("SLURM_CONF", devstack["SLURM_CONF"])
    report = _run(cli_inproc, tmp_path, "slurm:\n  hf_token: ${HF_TOKEN}\n", "slurm")
    _read_back_as_written(report)
    _no_value_under(home)
