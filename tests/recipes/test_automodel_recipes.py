"""Real AutoModel recipes work as is: each one in tests/recipes/automodel (copied from
NeMo AutoModel, see the README there) loads, keeps what the program reads, and renders a
Slurm script that bash accepts; with the Slurm block from AutoModel's launcher docs
appended, too. Over every example of an AutoModel checkout: the slow test below."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from automodel_check import SECRETS, check_text, main

from anylaunch.jobfile import automodel, loader
from automodel_docs import SLURM_BLOCK

HERE = Path(__file__).parent
CORPUS = sorted((HERE / "automodel").rglob("*.yaml"))


def test_the_corpus_is_a_few_dozen_recipes() -> None:
    assert len(CORPUS) >= 30


@pytest.mark.parametrize("path", CORPUS, ids=[str(p.relative_to(HERE)) for p in CORPUS])
def test_recipe_loads_keeps_program_view_and_renders_bash(path: Path, tmp_path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    outcome = check_text(str(path.relative_to(HERE)), text, tmp_path)
    assert outcome.problem is None, outcome.problem
    if "skypilot:" not in text:
        with_slurm = check_text(str(path.relative_to(HERE)), text, tmp_path, "\n" + SLURM_BLOCK)
        assert with_slurm.problem is None, with_slurm.problem
        # AutoModel's launcher defaults, for files that say they are AutoModel recipes.
        if automodel.is_recipe(loader.load(path, environ=SECRETS)):
            assert "#SBATCH --exclusive" in with_slurm.script
            assert "export NCCL_NVLS_ENABLE=0" in with_slurm.script


def test_program_references_survive_in_the_recipe_file(tmp_path: Path) -> None:
    path = HERE / "automodel/audio_finetune/qwen3_omni_asr/ami_sft.yaml"
    outcome = check_text(path.name, path.read_text(encoding="utf-8"), tmp_path)
    assert outcome.problem is None
    broken = "wandb:\n  project: '${WANDB_PROJECT_UNSET}'\n"  # the launcher's form: must be set
    assert "is not set" in (check_text("x.yaml", broken, tmp_path).problem or "")


AUTOMODEL_REPO = os.environ.get("AUTOMODEL_REPO", "")


@pytest.mark.slow
@pytest.mark.skipif(
    not AUTOMODEL_REPO or not Path(AUTOMODEL_REPO).exists(),
    reason="set AUTOMODEL_REPO to an AutoModel checkout or bare git mirror",
)
def test_every_example_recipe_of_automodel_works_as_is(capsys) -> None:
    rc = main([AUTOMODEL_REPO])
    assert rc == 0, capsys.readouterr().out
