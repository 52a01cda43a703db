"""Job file -> JobSpec: parse, expand `${...}`, apply `--set`, validate, route.

Every failure here is a ConfigError of one line naming file, line and key, raised before
anything is stored or submitted.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from anylaunch.backends.registry import names as backend_names
from anylaunch.backends.section import Sized
from anylaunch.errors import ConfigError
from anylaunch.jobfile import automodel, interpolate, limits, overrides
from anylaunch.jobfile.pins import Pins
from anylaunch.jobfile.spec import URL_REFERENCE, JobSpec, section_model
from anylaunch.jobfile.yamlsrc import KeyPath, Located, format_path, parse, text_keys

# Top-level keys the launcher owns, besides each backend's section (`launcher_keys`);
# anything else is the training program's recipe.
LAUNCHER_KEYS = frozenset(JobSpec.model_fields) - {"recipe", "source"}
# `checkpoint:` is also an AutoModel recipe section, so the program keeps its copy.
SHARED_WITH_RECIPE = frozenset({"checkpoint"})


def launcher_keys() -> frozenset[str]:
    """Every top-level key the launcher owns: its own and every backend's section."""
    return LAUNCHER_KEYS | frozenset(backend_names())


def load(
    path: str | os.PathLike[str],
    *,
    overrides_: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
) -> JobSpec:
    """Read a job file into a validated JobSpec."""
    environ = os.environ if environ is None else environ
    file = str(path)
    return from_text(read_text(file), file=file, overrides_=overrides_, environ=environ)


def read_text(file: str) -> str:
    """A job file's text, within the size limit; one-line errors for what stops reading."""
    try:
        with open(file, "rb") as handle:  # no more than the limit: the file may be huge
            raw = handle.read(limits.MAX_JOB_FILE_BYTES + 1)
        _check_file_size(file, len(raw))
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise ConfigError("no such file", file=file, fix="check the path of the job file") from None
    except IsADirectoryError:
        raise ConfigError("is a directory", file=file, fix="name a YAML job file") from None
    except UnicodeDecodeError:
        raise ConfigError("not UTF-8 text", file=file, fix="save the job file as UTF-8") from None
    except OSError as exc:
        raise ConfigError(
            f"cannot read ({exc.strerror})", file=file, fix="check permissions"
        ) from None
    return text


def from_text(
    text: str,
    *,
    file: str = "<job>",
    overrides_: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
) -> JobSpec:
    environ = os.environ if environ is None else environ
    return from_located(parse_text(text, file), overrides_=overrides_, environ=environ)


def parse_text(text: str, file: str) -> Located:
    """Job text (a job file's, a workflow file's, or sent by an agent) parsed within the
    limits of a job file: its size and its number of values, checked before the YAML
    tree is built, then its nesting and aliases while it is. Everything that reads job
    text reads it here."""
    if len(text) > limits.MAX_JOB_FILE_BYTES:  # characters: at least as many bytes
        _check_file_size(file, len(text.encode()))
    # Every value but the first is after a comma or a line break: an upper bound on the
    # values, counted at C speed before the (slow, per value) YAML tree is built.
    pieces = text.count(",") + text.count("\n")
    if pieces > limits.MAX_JOB_FILE_VALUES:
        raise ConfigError(
            f"the job file holds about {pieces} values (lines and list items), over the"
            f" {limits.MAX_JOB_FILE_VALUES} a job file may hold",
            file=file,
            fix="a job file holds settings: give long lists to the program as a file (inputs)",
        )
    return parse(text, file)


def from_located(
    located: Located,
    *,
    overrides_: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
) -> JobSpec:
    """A parsed job file (or one step of a workflow file) into a validated JobSpec."""
    environ = os.environ if environ is None else environ
    file = located.file
    pins = Pins(Path(file), environ)
    expander = interpolate.Expander(
        located, environ, lambda key, at: pins.resolve(key, at, located)
    )
    expansion = expander.result
    data = expander.walk(located.data, ())

    def fill(value: Any, path: KeyPath) -> Any:
        # An override replaces what was there: drop the old value's secret references,
        # and let `${NAME}` in the new value work as in the file.
        held = [p for p in expansion.secret_refs if p[: len(path)] == path]
        for old in held:
            del expansion.secret_refs[old]
        for old in [p for p in expansion.secret_names if p[: len(path)] == path]:
            del expansion.secret_names[old]
        new = expander.walk(value, path)
        if held and not any(p[: len(path)] == path for p in expansion.secret_refs):
            raise located.error(
                path,
                "holds a secret reference; a plain value set here would be written into"
                " the program's recipe file",
                f"set a reference instead: --set '{format_path(path)}=${{NAME}}' with NAME exported",
            )
        return new

    data = overrides.apply(located, data, list(overrides_), fill)
    _check_top_level(located, data)
    _webhook_references(located, data)

    owned = launcher_keys()
    launcher_part = {k: text_keys(v) for k, v in data.items() if k in owned}
    recipe = {
        k: _recipe_value(v, (k,), expansion.secret_refs)
        for k, v in data.items()
        if k not in owned or k in SHARED_WITH_RECIPE
    }
    env = _with_recipe_secrets(launcher_part.get("env"), expansion, environ, owned)
    if env is not None:
        launcher_part["env"] = env
    try:
        spec = JobSpec.model_validate({**launcher_part, "recipe": recipe, "source": file})
    except ValidationError as exc:
        raise _config_error(located, exc) from None
    _check_sizes(located, spec)
    spec = automodel.with_defaults(spec, environ)
    return spec


def _webhook_references(located: Located, data: dict[str, Any]) -> None:
    """Put back each `notify:` webhook URL as written (`${NAME}`), after expansion
    checked that NAME is set: the URL is a secret, kept by name like the job's own."""
    written = located.data.get("notify") if isinstance(located.data, dict) else None
    targets = data.get("notify")
    if not isinstance(targets, list) or not isinstance(written, list):
        return
    for i, target in enumerate(targets):
        if not isinstance(target, dict) or "url" not in target or i >= len(written):
            continue
        raw = written[i].get("url") if isinstance(written[i], dict) else None
        if not (isinstance(raw, str) and URL_REFERENCE.fullmatch(raw)):
            raise located.error(
                ("notify", i, "url"),
                "a webhook URL is a secret (whoever has it may post) and would be stored"
                " in the clear",
                "write url: ${SLACK_WEBHOOK_URL} and export SLACK_WEBHOOK_URL=...",
            )
        target["url"] = raw


def _with_recipe_secrets(
    env: Any, expansion: interpolate.Expansion, environ: Mapping[str, str], owned: frozenset[str]
) -> Any:
    """The job's env plus every secret the recipe names, so the program can expand them.

    The recipe file keeps `${WANDB_API_KEY}` as written; the value reaches the job the way
    every secret does (the submit environment, SkyPilot secrets, Lepton secret refs),
    never in a file or a plan.
    """
    wanted = {
        name
        for path, names in expansion.secret_names.items()
        if path and (path[0] not in owned or path[0] in SHARED_WITH_RECIPE)
        for name in names
    }
    if not wanted or (env is not None and not isinstance(env, dict)):
        return env
    merged = dict(env or {})
    for name in sorted(wanted):
        merged.setdefault(name, environ[name])
    return merged


def _check_file_size(file: str, nbytes: int) -> None:
    if nbytes > limits.MAX_JOB_FILE_BYTES:
        raise ConfigError(
            f"the job file is over {limits.size(limits.MAX_JOB_FILE_BYTES)}, the limit for job files",
            file=file,
            fix="a job file holds settings: run long commands from a script file, and give data as inputs",
        )


def _check_top_level(located: Located, data: dict[str, Any]) -> None:
    """Top-level keys outside the contract are the program's recipe keys.

    A recipe key that looks like a launcher key (`output:` beside `outputs`) is valid for
    the program, so it is only a preflight warning (see `recipe_key_lookalikes`). A
    section for a launcher anylaunch does not drive is refused: running it here would
    silently ignore where the user meant it to run.
    """
    for key, fix in UNSUPPORTED_SECTIONS.items():
        if key in data:
            raise located.error((key,), "is not a launcher anylaunch runs", fix)


# Launcher sections of other tools that a recipe may carry, and what to write instead.
UNSUPPORTED_SECTIONS = {
    "nemo_run": "NeMo-Run executors are not supported; write a slurm: or skypilot: section"
    " (or pass --backend) and remove nemo_run:",
}


def recipe_key_lookalikes(spec: JobSpec) -> list[tuple[str, str]]:
    """Top-level recipe keys that look like a misspelt launcher key: (key, launcher key)."""
    out = []
    for key in spec.recipe:
        if not isinstance(key, str) or key in SHARED_WITH_RECIPE:
            continue
        close = difflib.get_close_matches(key, sorted(launcher_keys()), n=1, cutoff=0.85)
        if close and close[0] != key:
            out.append((key, close[0]))
    return out


def _recipe_value(value: Any, path: KeyPath, secret_refs: dict[KeyPath, str]) -> Any:
    """The recipe keeps `${SECRET}` references as written; the program expands them."""
    if path in secret_refs:
        return secret_refs[path]
    if isinstance(value, dict):
        return {k: _recipe_value(v, (*path, k), secret_refs) for k, v in value.items()}
    if isinstance(value, list):
        return [_recipe_value(v, (*path, i), secret_refs) for i, v in enumerate(value)]
    return value


def _check_sizes(located: Located, spec: JobSpec) -> None:
    """A size written twice (the neutral key and a section's own word) must agree, and a
    job that runs its ranks without GPUs must not ask a section for GPUs."""
    for name in spec.sections():
        section = spec.section(name)
        if not isinstance(section, Sized):
            continue
        gpu_key = section.gpus_key()
        if spec.ranks_per_node is not None and section.asks_for_gpus():
            other = located.origin((name, gpu_key))
            raise located.error(
                ("ranks_per_node",),
                f"starts ranks without GPUs, but {name}.{gpu_key} ({other.file}:{other.line})"
                " asks for GPUs",
                f"write gpus_per_node (one rank per GPU) instead of ranks_per_node, or remove"
                f" {name}.{gpu_key}",
            )
        theirs_gpus = section.gpus()
        if spec.gpus_per_node is not None and theirs_gpus not in (None, spec.gpus_per_node):
            _disagree(located, (name, gpu_key), theirs_gpus, "gpus_per_node", spec.gpus_per_node)
        ranks_word = "ranks_per_node" if spec.ranks_per_node is not None else "gpus_per_node"
        for neutral, word in zip(("nodes", ranks_word), section.size_keys, strict=True):
            theirs = section.size(word)
            ours = getattr(spec, neutral)
            if theirs is not None and ours is not None and theirs != ours:
                _disagree(located, (name, word), theirs, neutral, ours)


def _disagree(located: Located, path: KeyPath, theirs: int, neutral: str, ours: int) -> None:
    other = located.origin((neutral,))
    raise located.error(
        path,
        f"{theirs} disagrees with {neutral}: {ours} ({other.file}:{other.line})",
        "write the size in one place only",
    )


def _config_error(located: Located, exc: ValidationError) -> ConfigError:
    """The first pydantic error as one line that names file, line and key path."""
    err = exc.errors(include_url=False)[0]
    # A mapping key that fails its own check is reported at that key ("[key]" dropped).
    path: KeyPath = tuple(p for p in err["loc"] if isinstance(p, str | int) and p != "[key]")
    kind = err["type"]
    if kind == "extra_forbidden":
        if len(path) == 2 and path[0] in backend_names() and path[1] == "command":
            # AutoModel's section dataclasses have a `command` that its CLI fills in.
            return located.error(
                path, "the command is not a section key", "write it as the top-level 'command:'"
            )
        parent = _model_at(path[:-1])
        known = sorted(parent.model_fields) if parent else []
        if parent is JobSpec:
            known = sorted(launcher_keys())
        hint = did_you_mean(str(path[-1]), known)
        fix = (
            f"{hint.strip(' ;') or 'remove it'}; known keys: {', '.join(known)}"
            if known
            else "remove it"
        )
        return located.error(path, "unknown key", fix)
    value = err.get("input")
    shown = (
        yaml.safe_dump(value, default_flow_style=True, width=60).strip().removesuffix("...").strip()
    )
    if len(shown) > 60:
        shown = shown[:57] + "..."
    what = err["msg"].removeprefix("Value error, ")
    if kind == "value_error":  # our validators' messages already say what to write
        what, _, fix = what.partition("; ")
        return located.error(path, what, fix or None)
    if kind == "missing":
        return located.error(path, "is required", f"add '{format_path(path)}:'")
    if kind == "literal_error":
        allowed = re.findall(r"'([^']*)'", str((err.get("ctx") or {}).get("expected", "")))
        hint = did_you_mean(str(value), allowed)
        return located.error(
            path, f"'{value}' is not allowed", f"use one of: {', '.join(allowed)}{hint}"
        )
    return located.error(path, f"{what} (got {shown})", _fix_for(kind, err))


def _fix_for(kind: str, err: Mapping[str, Any]) -> str:
    if kind.startswith("int") or kind.startswith("float"):
        return "write a number"
    if kind.startswith("bool"):
        return "write true or false"
    if kind in ("dict_type", "model_type"):
        return "write a mapping of key: value lines"
    if kind == "list_type":
        return "write a list ('- item' lines)"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        return "use a value in range"
    return "see the job file reference in README.md"


def _model_at(path: KeyPath) -> Any:
    """The pydantic model class that owns the mapping at `path`, for key suggestions."""
    model: Any = JobSpec
    for depth, part in enumerate(path):
        if isinstance(part, int):
            continue
        if depth == 0 and part in backend_names():  # a section, not a field of JobSpec
            model = section_model(str(part))
            continue
        field = model.model_fields.get(part) if hasattr(model, "model_fields") else None
        if field is None:
            return None
        model = _model_of(field.annotation)
        if model is None:
            return None
    return model


def _model_of(annotation: Any) -> Any:
    from typing import get_args

    if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
        return annotation
    for arg in get_args(annotation):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""
