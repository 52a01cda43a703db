"""docs/json.md, written from the same models as docs/schemas/: what each command's
`--json` prints, object by object, so the page cannot say something the schemas do not.

    python -m anylaunch.cli.jsondoc > docs/json.md
"""

from __future__ import annotations

import sys
from typing import Any

from anylaunch.cli.schemas import COMMANDS, command_schema

INTRO = """\
# JSON output

Every command that takes `--json` prints one JSON value on stdout: an object, or a list
or table of objects. The same objects are what the MCP tools return. Each object says
what it is in `kind` and which one in `id`:

| kind | id |
|---|---|
| `job` | the job id (`null` for `run --dry-run`, which records nothing) |
| `run` | the run id: a job file with `splits:` |
| `workflow` | the workflow id (`wf-...`; `null` for a dry run) |
| `logs`, `diagnosis` | the job they are about (`diagnose --log FILE`: `null`) |
| `shape`, `volume` | the Lepton resource shape id; the volume as a mount's `from` names it |
| `preflight`, `error` | `null`: they describe a request, not something recorded |

Objects nested in others name themselves the same way:

| kind | id |
|---|---|
| `split` | the run id and the split's number (`RUN/0`); its `attempts` are `job` objects |
| `step` | the step id in the workflow file |
| `event` | the job id and the event's place in the job's history (`JOB/0`: the first) |
| `plan` | the job id the plan renders |
| `check` | the preflight check's name |
| `handoff` | the consuming step's input path |
| `evidence` | where the log line is: `SOURCE:LINE` |

Two mappings are parts of their object rather than objects: an error's `error` (code
and message) and a diagnosis's `first_failure`; they carry no `id` or `kind`.

A failed command prints the `error` object on stdout (exit status 1, or 2 for bad
input). The machine-readable JSON Schemas are in docs/schemas/ (`anylaunch schema
COMMAND` prints one). This page is written from the same models by
`python -m anylaunch.cli.jsondoc > docs/json.md`, and a test keeps it current.
"""


def _type(prop: dict[str, Any]) -> str:
    if "const" in prop:
        return f"`{prop['const']!r}`".replace("'", '"').replace("True", "true")
    if "$ref" in prop:
        return prop["$ref"].rsplit("/", 1)[-1]
    if "enum" in prop:
        return " \\| ".join(f"`{v}`" for v in prop["enum"])
    if "anyOf" in prop:
        return " \\| ".join(_type(p) for p in prop["anyOf"])
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {_type(prop.get('items', {}))}"
    if kind == "object" and "additionalProperties" in prop:
        extra = prop["additionalProperties"]
        return f"map of {_type(extra) if isinstance(extra, dict) else 'any'}"
    return str(kind)


def _object(name: str, body: dict[str, Any]) -> list[str]:
    out = [f"### {name}", ""]
    if body.get("description"):
        out += [" ".join(body["description"].split()), ""]
    out += ["| field | type | meaning |", "|---|---|---|"]
    for field, prop in body.get("properties", {}).items():
        meaning = " ".join(str(prop.get("description", "")).split()).replace("|", "\\|")
        out.append(f"| `{field}` | {_type(prop)} | {meaning} |")
    return [*out, ""]


def render() -> str:
    lines = [INTRO, "## Commands", "", "| command | prints |", "|---|---|"]
    objects: dict[str, dict[str, Any]] = {}
    for command in COMMANDS:
        document = command_schema(command)
        objects.update(document.get("$defs", {}))
        root = {k: v for k, v in document.items() if k not in ("$defs", "$schema", "title")}
        if "properties" in root:  # the command's model is the object itself
            objects[COMMANDS[command].__name__] = root
            prints = COMMANDS[command].__name__
        else:
            prints = _type(root)
        label = f"`anylaunch {command.replace('-', ' ')} --json`"
        if command == "error":
            label = "any command that fails"
        lines.append(f"| {label} | {prints} |")
    lines += ["", "## Objects", ""]
    for name in sorted(objects):
        lines += _object(name, objects[name])
    return "\n".join(lines).rstrip("\n") + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
