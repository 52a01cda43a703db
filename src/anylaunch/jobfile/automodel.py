"""AutoModel recipes: recognise one, and give its Slurm and SkyPilot sections the defaults
of AutoModel's own launcher, so that a recipe behaves as its authors expect.

What anylaunch deliberately does differently is listed in README.md (the AutoModel
section). Everything the user wrote wins over a default here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from anylaunch.jobfile.spec import JobSpec, Profile
from anylaunch.node.command import CONFIG_PLACEHOLDER

# AutoModel's sbatch template exports these on every Slurm job.
SLURM_ENV = {
    "CUDA_DEVICE_MAX_CONNECTIONS": "1",
    "TORCH_NCCL_AVOID_RECORD_STREAMS": "1",
    "NCCL_NVLS_ENABLE": "0",
}
# AutoModel's `nsys profile` options, less its output name (anylaunch names the report):
# the capture range lets the program decide which steps are profiled.
NSYS_ARGS = [
    "-s",
    "none",
    "--trace=cuda,cudnn,nvtx",
    "--cudabacktrace=all",
    "--cuda-graph-trace=node",
    "--python-backtrace=cuda",
    "--wait",
    "all",
    "--capture-range=cudaProfilerApi",
    "--capture-range-end=stop",
]
MAIL_TYPE = "--mail-type=FAIL"
SKYPILOT_HF_HOME = "~/.cache/huggingface"
# AutoModel's SkyPilot launcher reads these two from the submitting environment.
CREDENTIALS = (("hf_token", "HF_TOKEN"), ("wandb_key", "WANDB_API_KEY"))
_TARGET_PREFIX = "nemo_automodel."
# AutoModel's recipe classes by their short names (what `recipe:` usually says) and the
# module that runs each as a script, as in nemo_automodel/recipes of the AutoModel whose
# examples tests/recipes checks. AutoModel's own launchers run `torchrun MODULE.py -c
# FILE`; modules without a `__main__` block cannot run that way and are left out.
RECIPE_MODULES = {
    "BenchmarkingRecipeForNextTokenPrediction": "nemo_automodel.recipes.llm.benchmark",
    "DiffusionGemmaSFTRecipe": "nemo_automodel.recipes.dllm.train_ft",
    "DiffusionLMSFTRecipe": "nemo_automodel.recipes.dllm.train_ft",
    "EmbeddingDistillRecipe": "nemo_automodel.recipes.retrieval.distill_bi_encoder",
    "FinetuneRecipeForMultimodal": "nemo_automodel.recipes.multimodal.finetune",
    "FinetuneRecipeForVLM": "nemo_automodel.recipes.vlm.finetune",
    "KnowledgeDistillationRecipeForNextTokenPrediction": "nemo_automodel.recipes.llm.kd",
    "KnowledgeDistillationRecipeForVLM": "nemo_automodel.recipes.vlm.kd",
    "TrainBiEncoderRecipe": "nemo_automodel.recipes.retrieval.train_bi_encoder",
    "TrainCrossEncoderRecipe": "nemo_automodel.recipes.retrieval.train_cross_encoder",
    "TrainDFlash2Recipe": "nemo_automodel.recipes.llm.train_dflash2",
    "TrainDFlashRecipe": "nemo_automodel.recipes.llm.train_dflash",
    "TrainDSparkRecipe": "nemo_automodel.recipes.llm.train_dspark",
    "TrainDominoRecipe": "nemo_automodel.recipes.llm.train_domino",
    "TrainEagle1Recipe": "nemo_automodel.recipes.llm.train_eagle1",
    "TrainEagle2Recipe": "nemo_automodel.recipes.llm.train_eagle2",
    "TrainEagle3Recipe": "nemo_automodel.recipes.llm.train_eagle3",
    "TrainFinetuneRecipeForNextTokenPrediction": "nemo_automodel.recipes.llm.train_ft",
    "TrainFinetuneRecipeForSequenceClassification": "nemo_automodel.recipes.llm.train_seq_cls",
    "TrainJetSpecRecipe": "nemo_automodel.recipes.llm.train_jetspec",
    "TrainVispecRecipe": "nemo_automodel.recipes.llm.train_vispec",
    "TrainVispecStage1Recipe": "nemo_automodel.recipes.llm.train_vispec",
}


# Fields that only AutoModel's launcher has: a section that uses one was written for it.
_OWN_FIELDS = {
    "slurm": {"hf_token", "wandb_key", "repo_root", "job_dir", "nemo_mount"},
    "skypilot": {"hf_token", "wandb_key", "job_dir", "gpus_per_node"},
}


def is_recipe(spec: JobSpec) -> bool:
    """An AutoModel recipe names its recipe class, builds AutoModel's components, or has a
    launcher section that uses fields only AutoModel's launcher knows."""
    recipe = spec.recipe
    if isinstance(recipe.get("recipe"), str) or "step_scheduler" in recipe:
        return True
    for name, fields in _OWN_FIELDS.items():
        section = getattr(spec, name)
        if section is not None and fields & section.model_fields_set:
            return True
    return _names_automodel(recipe, depth=0)


def _names_automodel(value: Any, depth: int) -> bool:
    if depth > 6:
        return False
    if isinstance(value, dict):
        target = value.get("_target_")
        if isinstance(target, str) and target.startswith(_TARGET_PREFIX):
            return True
        return any(_names_automodel(v, depth + 1) for v in value.values())
    if isinstance(value, list):
        return any(_names_automodel(v, depth + 1) for v in value[:50])
    return False


def recipe_command(recipe: Mapping[Any, Any]) -> list[str] | None:
    """How AutoModel's launchers run the recipe the file names: its module with `-c`."""
    target = recipe.get("recipe")
    if isinstance(target, dict):
        target = target.get("_target_")
    if not isinstance(target, str) or not target.strip():
        return None
    target = target.strip()
    module = target.rsplit(".", 1)[0] if "." in target else RECIPE_MODULES.get(target)
    return ["python", "-m", module, "-c", CONFIG_PLACEHOLDER] if module else None


def with_defaults(spec: JobSpec, environ: Mapping[str, str]) -> JobSpec:
    """The spec with AutoModel's launcher defaults filled in where the user wrote nothing."""
    if not is_recipe(spec):
        return spec
    update: dict[str, Any] = {}
    if not spec.command:
        command = recipe_command(spec.recipe)
        if command:
            update["command"] = command
    sections: dict[str, Any] = {}
    if spec.slurm is not None:
        sections["slurm"] = _slurm(spec)
        if spec.slurm.nsys_enabled or (spec.profile and spec.profile.nsys):
            profile = spec.profile or Profile()
            if not profile.nsys_args:
                update["profile"] = profile.model_copy(update={"nsys_args": list(NSYS_ARGS)})
    if spec.skypilot is not None:
        sections["skypilot"] = _skypilot(spec, environ)
    spec = spec.model_copy(update=update) if update else spec
    for name, section in sections.items():
        spec = spec.with_section(name, section)
    return spec


def _slurm(spec: JobSpec) -> Any:
    section = spec.slurm
    assert section is not None
    written = section.model_fields_set
    env = dict(section.env_vars)
    for name, value in SLURM_ENV.items():
        if name not in env and name not in spec.env:
            env[name] = value
    lines = list(section.sbatch_lines)
    if not any(line.startswith("--mail-type") for line in lines):
        lines.append(MAIL_TYPE)
    return section.model_copy(
        update={
            "exclusive": section.exclusive if "exclusive" in written else True,
            "env_vars": env,
            "sbatch_lines": lines,
        }
    )


def _skypilot(spec: JobSpec, environ: Mapping[str, str]) -> Any:
    section = spec.skypilot
    assert section is not None
    update: dict[str, Any] = {}
    if section.hf_home is None:
        update["hf_home"] = SKYPILOT_HF_HOME
    for field, name in CREDENTIALS:
        given = getattr(section, field) or section.env_vars.get(name) or spec.env.get(name)
        if not given and environ.get(name):
            update[field] = environ[name]
    return section.model_copy(update=update)
