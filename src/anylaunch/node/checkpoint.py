"""The resume contract: every attempt of a job starts from its newest complete checkpoint.

After a preemption the platform (a SkyPilot managed job, a Lepton resubmission, a Slurm
requeue) starts the same job again. Each attempt runs a small bash step before the
program that looks in the checkpoint directory and exports

- `ANYLAUNCH_CHECKPOINT_DIR`: the directory (always, when one is known);
- `ANYLAUNCH_RESUME_FROM`: the newest complete checkpoint in it (only when there is one);

and, for recipes that say `restore_from.path` (AutoModel), writes that checkpoint into
the recipe file the program reads. The looking is done by the in-job runtime
(`anylaunch_job.pyz newest DIR`, python3's standard library only), so the nodes need
neither anylaunch nor any tool beyond python3. Backend-neutral: a backend ships the
runtime with the job and renders `shell()` into its job script.

Which entry is the newest complete checkpoint:
1. a `LATEST`/`latest` pointer in the directory — a symlink, a text file naming an
   entry, or a directory (the checkpoint itself); writers update it after a save ends;
2. otherwise the complete entry with the highest step number (the last number in its
   name: `step-12.ckpt`, `epoch_0_step_100`, `checkpoint-500`). A file is complete
   unless its name ends in .tmp/.partial/.incomplete/.lock/.part (files are written by
   rename). A directory is complete only when its writer marked it so: a `.complete`,
   `COMPLETE`, `.done` or `DONE` file, or torch.distributed.checkpoint's `.metadata`
   (written last), in it or in one of its subfolders; an `.incomplete` marker vetoes.
   A save cut off by a preemption is therefore never chosen.
"""

from __future__ import annotations

import copy
import posixpath
import shlex
from typing import TYPE_CHECKING, Any

from anylaunch.node import command, runtime
from anylaunch.node.runtime.checkpoint import PLACEHOLDER

if TYPE_CHECKING:
    from anylaunch.jobfile.spec import JobSpec

RESUME_ENV = "ANYLAUNCH_RESUME_FROM"
CHECKPOINT_ENV = "ANYLAUNCH_CHECKPOINT_DIR"


def checkpoint_dir(spec: JobSpec) -> str | None:
    """Where the job's checkpoints live: `checkpoint.dir`, else `restore_from.path`'s folder.

    AutoModel recipes name the folder as `checkpoint.checkpoint_dir` (read into
    `checkpoint.dir`) or only point at the checkpoint to load (`/checkpoints/latest`).
    """
    if spec.checkpoint and spec.checkpoint.dir:
        return spec.checkpoint.dir
    path = restore_path(spec.recipe)
    if path:
        parent = posixpath.dirname(path.rstrip("/"))
        return parent or None
    return None


def restore_path(recipe: dict[str, Any]) -> str | None:
    restore = recipe.get("restore_from")
    if isinstance(restore, dict) and isinstance(restore.get("path"), str) and restore["path"]:
        return restore["path"]
    return None


def interval_minutes(spec: JobSpec) -> float | None:
    return spec.checkpoint.interval_minutes if spec.checkpoint else None


def interval_steps(spec: JobSpec) -> int | None:
    """AutoModel's `step_scheduler.checkpoint_interval` (steps, not time)."""
    scheduler = spec.recipe.get("step_scheduler")
    value = scheduler.get("checkpoint_interval") if isinstance(scheduler, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def recipe_for_resume(recipe: dict[str, Any]) -> dict[str, Any]:
    """The recipe with `restore_from.path` replaced by the placeholder `fill_recipe` fills."""
    if restore_path(recipe) is None:
        return recipe
    out = copy.deepcopy(recipe)
    out["restore_from"]["path"] = PLACEHOLDER
    return out


def shell(directory: str | None, runtime_word: str, *, image: str | None = None) -> str:
    """Bash run before the program on every node: export the contract's variables.

    `runtime_word` is a bash word for the shipped runtime's path; `image` names the
    container in the one-line error when it has no python3.
    """
    if not directory:
        return ""
    newest = runtime.shell(runtime_word, "newest", f'"${CHECKPOINT_ENV}"')
    return "\n".join(
        [
            runtime.require_python(image, "resume"),
            f"export {CHECKPOINT_ENV}={shlex.quote(directory)}",
            f"{RESUME_ENV}=$({newest}) || exit $?",
            f'if [ -n "${RESUME_ENV}" ]; then',
            f"  export {RESUME_ENV}",
            f'  echo "anylaunch: resuming from ${RESUME_ENV}"',
            "else",
            f"  unset {RESUME_ENV}",
            "fi",
        ]
    )


def config_text(spec: JobSpec) -> str | None:
    """The file `{config}` in the command stands for on the node, as YAML: the recipe
    (the job file less the launcher's sections). With a checkpoint folder its
    `restore_from.path` holds the placeholder `config_fill` replaces on the node.
    None when the command does not name `{config}`: no file is written.
    """
    if not command.uses_recipe(spec.command):
        return None
    import yaml

    recipe = recipe_for_resume(spec.recipe) if checkpoint_dir(spec) else spec.recipe
    return yaml.safe_dump(recipe, sort_keys=False)


def config_fill(spec: JobSpec, path: str, runtime_word: str) -> str:
    """Bash that writes the checkpoint into the `{config}` file at `path` (a bash word),
    or "" when there is nothing to fill (no `{config}`, no checkpoint folder, or no
    `restore_from.path` in the recipe)."""
    if not checkpoint_dir(spec) or not command.uses_recipe(spec.command):
        return ""
    return fill_recipe(path, spec.recipe, runtime_word)


def fill_recipe(path: str, recipe: dict[str, Any], runtime_word: str) -> str:
    """Bash that puts the checkpoint (or the recipe's own path) into `restore_from.path`.

    `path` is a bash word for the rendered recipe file (`"$ANYLAUNCH_RECIPE"`), which
    holds the placeholder where the path goes; the runtime writes the value there
    (ANYLAUNCH_RESUME_FROM when the resume step found one, else the recipe's own path).
    """
    original = restore_path(recipe)
    if original is None:
        return ""
    fill = runtime.shell(runtime_word, "fill-recipe", path, shlex.quote(original))
    return f"{fill} || exit $?"
