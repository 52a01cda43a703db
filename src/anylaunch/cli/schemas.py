"""JSON Schemas of every command's `--json` output and every MCP tool's result.

Generated from the models in `contract.outputs`; the committed copies in docs/schemas/
are what programs rely on, and a test keeps them equal to these. After changing an
output model, rewrite them with:

    python -m anylaunch.cli.schemas docs/schemas
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from anylaunch.contract import outputs as out
from anylaunch.contract.outputs import DIALECT

# Command (as typed after `anylaunch`, words joined by '-') -> the model of its --json output.
COMMANDS: dict[str, type[BaseModel]] = {
    "run": out.RunResult,
    "retry": out.RetryResult,
    "preflight": out.Preflight,
    "ps": out.JobList,
    "status": out.StatusResult,
    "logs": out.Logs,
    "cancel": out.Cancelled,
    "diagnose": out.Diagnosis,
    "stack": out.Stack,
    "exec": out.ExecResult,
    "forward": out.ForwardResult,
    "lepton-shapes": out.ShapeTable,
    "lepton-volumes": out.VolumeList,
    "error": out.Error,
}


def schema(model: type[BaseModel], title: str) -> dict[str, Any]:
    body = model.model_json_schema(by_alias=True)
    body["title"] = title
    return {"$schema": DIALECT, **body}


def command_schema(name: str) -> dict[str, Any]:
    return schema(COMMANDS[name], f"anylaunch {name.replace('-', ' ')} --json")


def all_schemas() -> dict[str, dict[str, Any]]:
    """Relative file name -> schema, for every command and every MCP tool."""
    from anylaunch.mcp.tools import TOOLS

    files = {f"{name}.json": command_schema(name) for name in COMMANDS}
    for tool in TOOLS:
        files[f"mcp/{tool.name}.json"] = tool.output_schema_document()
    return files


def render(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def write(folder: Path) -> list[Path]:
    written = []
    for name, document in all_schemas().items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(document), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/schemas")):
        print(path)
