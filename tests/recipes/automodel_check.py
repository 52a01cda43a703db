"""Does an AutoModel recipe work as is? Load it, render a Slurm script, compare.

For one recipe file this checks that anylaunch loads it, that the recipe the program
reads (`{config}`) is what PyYAML reads from the user's file less the launcher sections
(key order, key types, the program's own `${...}` references), that the rendered sbatch
script passes `bash -n`, and that no secret value appears in the plan.

Run over a whole AutoModel checkout (or a bare git mirror of one):

    python tests/recipes/automodel_check.py PATH_TO_AUTOMODEL [--rev REV]
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from anylaunch import api
from anylaunch.errors import AnylaunchError
from anylaunch.jobfile import loader
from anylaunch.store import Store

# Values the check exports for the secrets recipes name; none may appear in a plan.
SECRETS = {"HF_TOKEN": "hf_check_secret_4711", "WANDB_API_KEY": "wandb_check_secret_4711"}
COMMAND = ["python", "-m", "nemo_automodel.recipes.llm.train_ft", "-c", "{config}"]
# The launcher's own forms; every other `${...}` belongs to the program.
_LAUNCHER_REF = re.compile(r"\$\$|\$\{[A-Za-z_][A-Za-z0-9_]*(:-[^}]*)?\}|\$\{pin:[^}]*\}")


@dataclass
class Outcome:
    name: str
    problem: str | None  # None: the recipe works as is
    script: str = ""


def check_text(name: str, text: str, home: Path, extra: str = "") -> Outcome:
    """Check one recipe; `extra` is YAML appended to it (a launcher section)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / Path(name).name
        path.write_text(text + extra, encoding="utf-8")
        try:
            spec = loader.load(path, environ=SECRETS)
            spec = spec.model_copy(update={"command": list(COMMAND)})
            plan = api.dry_run(spec, "slurm", store=Store(home))
        except AnylaunchError as exc:
            return Outcome(name, f"refused: {exc.message.replace(str(path), name)}")
        except Exception as exc:  # a traceback is exactly what this check reports
            return Outcome(name, f"traceback: {type(exc).__name__}: {exc}")
    script = plan.payload["script"]
    syntax = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
    if syntax.returncode != 0:
        return Outcome(name, f"bash -n: {syntax.stderr.strip()[:200]}", script)
    everything = json.dumps(plan.model_dump(mode="json"))
    for secret in SECRETS.values():
        if secret in everything:
            return Outcome(name, "a secret value is in the plan", script)
    recipe_text = plan.files.get("recipe.yaml")
    if recipe_text is None:
        return Outcome(name, "no recipe file in the plan", script)
    wanted = program_view(yaml.safe_load(text) or {})
    got = yaml.safe_load(recipe_text) or {}
    difference = first_difference(wanted, got, ())
    if difference:
        return Outcome(name, f"the program would read something else: {difference}", script)
    return Outcome(name, None, script)


def program_view(data: dict[Any, Any]) -> dict[Any, Any]:
    """PyYAML's reading of a recipe, less the sections the launcher owns."""
    own = loader.launcher_keys() - loader.SHARED_WITH_RECIPE
    return {k: v for k, v in data.items() if k not in own}


def first_difference(wanted: Any, got: Any, path: tuple[Any, ...]) -> str | None:
    """Where the two trees differ; strings with the launcher's own references (expanded at
    load time) are left out, the program's own references must be equal."""
    where = ".".join(map(str, path)) or "(top)"
    if isinstance(wanted, dict):
        if not isinstance(got, dict) or list(wanted) != list(got):
            return f"{where}: keys {list(wanted)[:8]} became {list(got)[:8] if isinstance(got, dict) else type(got).__name__}"
        for key in wanted:
            found = first_difference(wanted[key], got[key], (*path, key))
            if found:
                return found
        return None
    if isinstance(wanted, list):
        if not isinstance(got, list) or len(wanted) != len(got):
            return f"{where}: a list of {len(wanted)} items changed"
        for index, (a, b) in enumerate(zip(wanted, got, strict=True)):
            found = first_difference(a, b, (*path, index))
            if found:
                return found
        return None
    if isinstance(wanted, str) and _LAUNCHER_REF.search(wanted):
        return None
    if type(wanted) is not type(got) or wanted != got:
        return f"{where}: {wanted!r} became {got!r}"
    return None


def recipe_files(repo: Path, rev: str = "HEAD") -> list[tuple[str, str]]:
    """(path, text) of every example recipe: from a checkout, or from a git mirror."""
    examples = repo / "examples"
    if examples.is_dir():
        return [
            (str(p.relative_to(repo)), p.read_text(encoding="utf-8"))
            for p in sorted(examples.rglob("*"))
            if p.suffix in (".yaml", ".yml") and p.is_file()
        ]
    git = ["git", f"--git-dir={repo}"]
    names = subprocess.run(
        [*git, "ls-tree", "-r", "--name-only", rev, "examples"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    out = []
    for name in names:
        if name.endswith((".yaml", ".yml")):
            shown = subprocess.run(
                [*git, "show", f"{rev}:{name}"], capture_output=True, text=True, check=True
            )
            out.append((name, shown.stdout))
    return out


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    repo = Path(argv[0])
    rev = argv[argv.index("--rev") + 1] if "--rev" in argv else "HEAD"
    with tempfile.TemporaryDirectory() as home:
        outcomes = [check_text(n, t, Path(home)) for n, t in recipe_files(repo, rev)]
    bad = [o for o in outcomes if o.problem]
    print(f"{len(outcomes) - len(bad)} of {len(outcomes)} example recipes work as is")
    for o in bad:
        print(f"  {o.name}: {o.problem}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
