"""docs/json.md says what `--json` prints; it is written from the output models, and
real output carries the `id` and `kind` it promises."""

from __future__ import annotations

from pathlib import Path

from anylaunch.cli import jsondoc
from anylaunch.cli.schemas import COMMANDS, command_schema

DOC = Path(__file__).resolve().parents[2] / "docs" / "json.md"


def test_json_doc_is_current_with_the_output_models():
    assert DOC.read_text(encoding="utf-8") == jsondoc.render(), (
        "docs/json.md is stale — run: python -m anylaunch.cli.jsondoc > docs/json.md"
    )


def test_every_object_a_command_prints_has_id_and_kind():
    for command in COMMANDS:
        document = command_schema(command)
        objects = [document] if "properties" in document else []
        objects += [
            body
            for body in document.get("$defs", {}).values()
            if "kind" in body.get("properties", {})
        ]
        roots = [*document.get("anyOf", []), document.get("items", {})]
        roots.append(document.get("additionalProperties") or {})
        named = {r["$ref"].rsplit("/", 1)[-1] for r in roots if isinstance(r, dict) and "$ref" in r}
        for name in named:
            objects.append(document["$defs"][name])
        for option in document.get("anyOf", []):
            ref = (option.get("items") or {}).get("$ref")
            if ref:
                objects.append(document["$defs"][ref.rsplit("/", 1)[-1]])
        assert objects, command
        for body in objects:
            assert {"id", "kind"} <= set(body["properties"]), (command, body.get("title"))


# Mappings that are parts of one object (an error's code and message, where a diagnosis
# saw the first failure, which code a job ran and its snapshot, what an attempt keeps of its
# diagnosis), not objects of their own.
PARTS = {"ErrorBody", "FirstFailure", "Source", "SnapshotOut", "AttemptDiagnosis"}


def test_every_object_nested_in_another_has_id_and_kind_too():
    for command in COMMANDS:
        for name, body in command_schema(command).get("$defs", {}).items():
            if body.get("type") == "object" and name not in PARTS:
                assert {"id", "kind"} <= set(body.get("properties", {})), (command, name)


def test_a_run_of_splits_prints_its_id_and_kind_run(cli, write):
    path = write("launcher: none\nsplits: 2\ncommand: [bash, -c, 'exit 0']\n")
    run = cli("run", str(path), "--json").json()
    assert run["kind"] == "run" and run["id"] and "run" not in run
    assert all(a["kind"] == "job" for s in run["splits"] for a in s["attempts"])
    splits = [(s["kind"], s["id"]) for s in run["splits"]]
    assert splits == [("split", f"{run['id']}/0"), ("split", f"{run['id']}/1")]
    assert cli("status", run["id"], "--json").json()["id"] == run["id"]


def test_a_jobs_events_and_plan_carry_id_and_kind(cli, write):
    path = write("launcher: none\ncommand: [bash, -c, 'exit 0']\n")
    dry = cli("run", str(path), "--dry-run", "--json").json()
    assert (dry["plan"]["kind"], dry["plan"]["id"]) == ("plan", dry["plan"]["job_id"])
    job = cli("run", str(path), "--json").json()
    events = cli("status", job["id"], "--json").json()["events"]
    assert events and [(e["kind"], e["id"]) for e in events] == [
        ("event", f"{job['id']}/{n}") for n in range(len(events))
    ]
