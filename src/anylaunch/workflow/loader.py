"""Workflow file -> Workflow: `steps:`, each a job that inherits the top-level keys.

Every error is a ConfigError of one line naming the file, the line and the key where the
trouble was written (a `needs` entry, a `${steps...}` reference), raised before anything
is stored or submitted.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from typing import Any

from anylaunch.backends import registry
from anylaunch.backends.registry import names as backend_names
from anylaunch.errors import ConfigError
from anylaunch.jobfile import loader
from anylaunch.jobfile.spec import JobSpec
from anylaunch.jobfile.yamlsrc import KeyPath, Located, Origin, format_path
from anylaunch.workflow import graph, handoff
from anylaunch.workflow.model import Step, Workflow

# `${steps.ID.outputs.PATH}`: an earlier step's output, by the path it was written under.
REFERENCE = re.compile(r"\$\{steps\.([^.}]*)\.outputs\.([^}]*)\}")
# An output URI named in a command, hook or env value becomes part of that text, and a
# command or hook string is a shell line: only characters a shell reads as themselves
# (and `${NAME}`, which anylaunch expands as it does in the producer's outputs) may be
# spliced there, so a URI cannot run `$(...)`, end a word or start another command.
SPLICEABLE = re.compile(r"(?:[A-Za-z0-9._~:/@%+=,-]|\$\{[A-Za-z_][A-Za-z0-9_]*\})*")
STEP_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,39}")
STEP_KEYS = ("needs", "backend")  # a step's own keys, not the job's
MERGED = ("env",)  # mappings a step adds to; every other key a step writes replaces


def load(path: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> Workflow:
    environ = os.environ if environ is None else environ
    file = str(path)
    located = loader.parse_text(loader.read_text(file), file)
    data = located.data
    steps = data.get("steps")
    if not isinstance(steps, dict) or not steps:
        raise located.error(
            ("steps",), "must be a mapping of step id to job", "write 'steps:' then 'ID:' lines"
        )
    for key in STEP_KEYS:
        if key in data:
            raise located.error((key,), "belongs to a step", f"move it under steps.ID.{key}")
    top = {k: v for k, v in data.items() if k != "steps"}
    bodies: dict[str, dict[str, Any]] = {}
    for sid, body in steps.items():
        if not isinstance(sid, str) or not STEP_ID.fullmatch(sid):
            raise located.error(
                ("steps", sid),
                f"'{sid}' is not a step id",
                "use letters, digits, '-' and '_' (at most 40, starting with a letter or digit)",
            )
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise located.error(
                ("steps", sid), "must be a mapping (a job)", "write 'key: value' lines"
            )
        bodies[sid] = body
    needs, written_at = _needs(located, bodies)
    references = _references(located, top, bodies, needs, written_at)
    try:
        graph.find_cycle(needs)
    except graph.Cycle as cycle:
        first, second = cycle.path[-2], cycle.path[-1]
        raise located.error(
            written_at[(first, second)],
            f"steps form a cycle: {' → '.join(cycle.path)}",
            "remove one of these needs (a step can only use what runs before it)",
        ) from None
    built: dict[str, Step] = {}
    for sid in bodies:
        spec, backend = _step_spec(located, top, sid, bodies, environ)
        built[sid] = Step(sid, spec, backend, needs[sid])
    name = str(top.get("name") or os.path.splitext(os.path.basename(file))[0])
    workflow = Workflow(file=file, name=name, steps=built)
    for sid, found in references.items():
        built[sid].handoffs = handoff.resolve(workflow, sid, found)
    return workflow


def _needs(
    located: Located, bodies: dict[str, dict[str, Any]]
) -> tuple[dict[str, list[str]], dict[tuple[str, str], KeyPath]]:
    """Each step's `needs`, checked; and where each (step, needed) pair was written."""
    needs: dict[str, list[str]] = {}
    written_at: dict[tuple[str, str], KeyPath] = {}
    for sid, body in bodies.items():
        raw = body.get("needs", [])
        raw = [raw] if isinstance(raw, str) else raw
        if not isinstance(raw, list):
            raise located.error(
                ("steps", sid, "needs"), "must be a list of step ids", "write needs: [ID, ...]"
            )
        needs[sid] = []
        for index, other in enumerate(raw):
            path: KeyPath = ("steps", sid, "needs", index)
            if not isinstance(body.get("needs"), list):
                path = ("steps", sid, "needs")
            if other not in bodies:
                raise located.error(path, f"no step '{other}'", _known(str(other), bodies))
            if other == sid:
                raise located.error(path, "a step cannot need itself", "remove it")
            if other not in needs[sid]:
                needs[sid].append(other)
                written_at[(sid, other)] = path
    return needs, written_at


def _references(
    located: Located,
    top: dict[str, Any],
    bodies: dict[str, dict[str, Any]],
    needs: dict[str, list[str]],
    written_at: dict[tuple[str, str], KeyPath],
) -> dict[str, list[tuple[KeyPath, str, str]]]:
    """Every `${steps.ID.outputs.PATH}` of each step: (where, producer, output path).
    A step needs every step whose output it names."""
    found: dict[str, list[tuple[KeyPath, str, str]]] = {}
    for sid, body in bodies.items():
        for path, text in _strings(body, ("steps", sid)):
            for match in REFERENCE.finditer(text):
                producer, output = match.group(1), match.group(2)
                if producer not in bodies:
                    raise located.error(path, f"no step '{producer}'", _known(producer, bodies))
                if producer == sid:
                    raise located.error(
                        path, "a step cannot read its own output", "name an earlier step"
                    )
                outputs = _merged(top, bodies[producer]).get("outputs") or {}
                if not isinstance(outputs, dict) or output not in outputs:
                    known = ", ".join(map(str, outputs)) if isinstance(outputs, dict) else ""
                    raise located.error(
                        path,
                        f"step '{producer}' has no output '{output}'",
                        f"use one of its outputs ({known})"
                        if known
                        else f"add outputs: {{{output}: s3://...}} to step {producer}",
                    )
                uri = str(outputs[output])
                if not _is_input(path) and not SPLICEABLE.fullmatch(uri):
                    raise located.error(
                        path,
                        f"step '{producer}' output '{output}' ({uri!r}) has characters a shell"
                        " would read, and this text is spliced into a command",
                        f"name the output with letters, digits and / . _ - only, or pass it"
                        f" through inputs: (steps.{sid}.inputs)",
                    )
                found.setdefault(sid, []).append((path, producer, output))
                if producer not in needs[sid]:
                    needs[sid].append(producer)
                    written_at[(sid, producer)] = path
    return found


def _is_input(path: KeyPath) -> bool:
    """`steps.ID.inputs.NAME`: a handoff, staged as a URI, never spliced into text."""
    return len(path) >= 4 and path[2] == "inputs"


def _strings(value: Any, path: KeyPath) -> list[tuple[KeyPath, str]]:
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _strings(v, (*path, k))]
    if isinstance(value, list):
        return [s for i, v in enumerate(value) for s in _strings(v, (*path, i))]
    return [(path, value)] if isinstance(value, str) and "${steps." in value else []


def _merged(top: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """A step's job: the top-level keys, then the step's (which add to `env`)."""
    out = dict(top)
    for key, value in body.items():
        if key in STEP_KEYS:
            continue
        if key in MERGED and isinstance(value, dict) and isinstance(top.get(key), dict):
            out[key] = {**top[key], **value}
        else:
            out[key] = value
    return out


def _step_spec(
    located: Located,
    top: dict[str, Any],
    sid: str,
    bodies: dict[str, dict[str, Any]],
    environ: Mapping[str, str],
) -> tuple[JobSpec, str]:
    body = bodies[sid]
    backend = _backend(located, top, sid, body)
    data = _merged(top, body)
    for name in backend_names():  # only the chosen backend's section goes with the step
        if name != backend:
            data.pop(name, None)
    data = _replace_refs(data, top, bodies)
    if "name" not in body:  # each step's jobs are told apart by name on every backend
        data["name"] = f"{top.get('name') or 'workflow'}-{sid}"
    step_located = Located(data=data, file=located.file, origins=_origins(located, sid, body))
    try:
        spec = loader.from_located(step_located, environ=environ)
    except ConfigError as exc:
        raise in_step(exc, sid, body) from None
    return spec, backend


def in_step(exc: ConfigError, sid: str, body: Mapping[str, Any] | None = None) -> ConfigError:
    """A step's job error, its key named under `steps.ID` where the step wrote it."""
    key = exc.key or ""
    head = re.split(r"[.\[]", key, maxsplit=1)[0]
    if body is None or head in body or not key:
        key = format_path(("steps", sid)) + (f".{key}" if key else "")
    return ConfigError(exc.what, file=exc.file, line=exc.line, key=key, fix=exc.fix, code=exc.code)


def _backend(located: Located, top: dict[str, Any], sid: str, body: dict[str, Any]) -> str:
    """`backend:`, else the one section the step writes, else the one at the top level,
    else the default (local), as for a job file."""
    if "backend" in body:
        name = body["backend"]
        if name not in backend_names():
            raise located.error(
                ("steps", sid, "backend"),
                f"'{name}' is not a backend",
                f"use one of: {', '.join(backend_names())}",
            )
        return str(name)
    # The step's own sections, then the top level's: the first place with one decides.
    for where, whose, fix in (
        (body, "", "keep one, or pick with 'backend: {}'"),
        (top, "the top level has ", "say which this step runs on: 'backend: {}'"),
    ):
        found = [b for b in backend_names() if b in where]
        if len(found) > 1:
            raise located.error(
                ("steps", sid),
                f"{whose}sections for several backends ({', '.join(found)})",
                fix.format(found[0]),
            )
        if found:
            return found[0]
    return registry.DEFAULT


def _origins(located: Located, sid: str, body: dict[str, Any]) -> dict[KeyPath, Origin]:
    """Where each key of a step's job was written: in the step, or at the top level."""
    out: dict[KeyPath, Origin] = {}
    for path, origin in located.origins.items():
        if not path or path[0] == "steps":
            continue
        if path[0] in body and (path[0] not in MERGED or len(path) == 1):
            continue  # replaced by the step
        out[path] = origin
    prefix = ("steps", sid)
    for path, origin in located.origins.items():
        if path[:2] == prefix and len(path) > 2 and path[2] not in STEP_KEYS:
            out[path[2:]] = origin
    return out


def _replace_refs(value: Any, top: dict[str, Any], bodies: dict[str, dict[str, Any]]) -> Any:
    """`${steps.ID.outputs.PATH}` replaced by the producer's output URI as written (so
    `${VAR}` in it expands as it does for the producer)."""
    if isinstance(value, dict):
        return {k: _replace_refs(v, top, bodies) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_refs(v, top, bodies) for v in value]
    if isinstance(value, str) and "${steps." in value:
        return REFERENCE.sub(
            lambda m: str(_merged(top, bodies[m.group(1)])["outputs"][m.group(2)]), value
        )
    return value


def _known(word: str, bodies: Mapping[str, Any]) -> str:
    close = difflib.get_close_matches(word, list(bodies), n=1, cutoff=0.6)
    hint = f"did you mean '{close[0]}'? " if close else ""
    return f"{hint}steps: {', '.join(bodies)}"
