"""The published JSON Schemas: current with the models, printed by `anylaunch schema`,
and the MCP tools' schemas are the contract models' own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from anylaunch.cli.schemas import all_schemas, render
from anylaunch.contract import inputs
from anylaunch.mcp.tools import BY_NAME, TOOLS

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "docs" / "schemas"


def test_committed_schemas_match_the_output_models():
    expected = all_schemas()
    committed = {
        str(p.relative_to(SCHEMAS)): p.read_text() for p in sorted(SCHEMAS.rglob("*.json"))
    }
    assert sorted(committed) == sorted(expected), "run: python -m anylaunch.cli.schemas"
    for name, document in expected.items():
        assert committed[name] == render(document), (
            f"docs/schemas/{name} is stale — run: python -m anylaunch.cli.schemas"
        )


def test_schema_command_prints_the_committed_schema(cli_inproc):
    result = cli_inproc("schema", "status")
    assert result.rc == 0 and result.out == (SCHEMAS / "status.json").read_text()
    tool = cli_inproc("schema", "mcp", "wait")
    assert json.loads(tool.out)["title"] == "anylaunch MCP tool wait"
    unknown = cli_inproc("schema", "stauts")
    assert unknown.rc == 2 and unknown.err.count("\n") == 1 and "status" in unknown.err


def test_every_command_with_json_output_has_a_schema(cli_inproc):
    help_text = cli_inproc("--help").out
    commands = [
        line.split()[0] for line in help_text.split("Commands:")[1].splitlines() if line.strip()
    ]
    for command in commands:
        if "  --json " in cli_inproc(command, "--help").out:
            assert (SCHEMAS / f"{command}.json").exists(), command
    for sub in ("shapes", "volumes"):
        assert (SCHEMAS / f"lepton-{sub}.json").exists()


def test_tool_input_schemas_are_the_models_the_cli_validates_with():
    assert BY_NAME["run"].input_schema() == inputs.RunArgs.model_json_schema()
    assert BY_NAME["logs"].input_schema() == inputs.LogsArgs.model_json_schema()
    for tool in TOOLS:
        schema = tool.input_schema()
        assert schema["type"] == "object" and schema.get("additionalProperties") is False
        assert tool.output_schema()["type"] == "object"  # MCP wants an object at the root


def test_mcp_help_does_not_import_the_sdk(spawns):
    def imported(*args: str) -> set[str]:
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "anylaunch", *args],
            capture_output=True,
            text=True,
            check=True,
        )
        assert "anylaunch mcp" in proc.stdout or "Usage" in proc.stdout
        return {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if "|" in line}

    for args in (("mcp", "--help"), ("--help",)):
        modules = imported(*args)
        assert "anylaunch.cli" in modules  # the probe sees our imports at all
        assert not {m for m in modules if m == "mcp" or m.startswith(("mcp.", "pydantic"))}
