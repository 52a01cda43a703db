"""The MCP server under hostile input, through the official SDK's client over stdio: job
text that is a YAML weapon, numbers past what Python reads from text, and resource URIs
it never made. Each is one tool error (or one protocol error) saying what to fix, in about
the time the CLI takes; never a traceback in the server's log, never a minute of CPU."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from reliability_helpers import FIGURES, ROOT, cli_env, count_tracebacks

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

# The CLI refuses each of these in well under a second; a server that walks the text
# itself before the loader's limits apply spends minutes or overflows the stack.
WEAPONS = {
    "brackets": "[" * 50_000,
    "nested-mappings": "command: " + "{a: " * 3_000 + "x" + "}" * 3_000 + "\n",
    "alias-bomb": "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
    + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9))
    + "command: [echo]\n",
}
SECONDS = 20.0  # generous for a loaded machine: the CLI takes about 0.3 s


def serve(home: Path, scenario: Any, *, read_only: bool = False) -> str:
    """Run `scenario(client)` against `anylaunch mcp`; the server's log."""
    log = home.parent / "mcp-server.log"
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "anylaunch", "mcp", *(["--read-only"] if read_only else [])],
        env=cli_env(home),
        cwd=str(ROOT),
    )

    async def main() -> None:
        with log.open("a") as errlog:
            async with Client(stdio_client(server, errlog=errlog)) as client:
                await scenario(client)

    anyio.run(main)
    return log.read_text() if log.exists() else ""


def recorded_job(home: Path) -> None:
    """A finished one-node job, job00001, with a log."""
    from anylaunch.state import State
    from anylaunch.store import JobRecord, Store

    log = home / "jobs" / "job00001" / "logs" / "node-0.log"
    log.parent.mkdir(parents=True)
    log.write_text("hello\n")
    plan = {"nodes": 1, "payload": {"nodes": [{"node_rank": 0, "log": str(log)}]}}
    store = Store(home)
    try:
        store.add(
            JobRecord(
                id="job00001", name="j", backend="local", state=State.SUCCEEDED, exit_code=0,
                job_dir=str(log.parent.parent), plan=plan,
            )
        )  # fmt: skip
    finally:
        store.close()


def error_of(result: Any) -> dict[str, Any]:
    assert result.is_error, result.content
    return json.loads(result.content[0].text)["error"]


@pytest.mark.parametrize("weapon", sorted(WEAPONS))
def test_yaml_weapons_sent_as_job_text_are_config_errors_in_cli_time(
    weapon: str, home: Path, spawns
) -> None:
    text = WEAPONS[weapon]
    took: dict[str, float] = {}

    async def scenario(client: Client) -> None:
        for tool in ("dry_run", "preflight", "run"):
            start = time.monotonic()
            with anyio.fail_after(10 * SECONDS):
                result = await client.call_tool(tool, {"yaml": text})
            took[tool] = time.monotonic() - start
            FIGURES["hostile inputs"] += 1
            error = error_of(result)
            assert error["code"] == "CONFIG", error
            assert "\n" not in error["message"], error

    log = serve(home, scenario)
    assert count_tracebacks(log) == 0, log[-3000:]
    assert "Internal" not in log, log[-3000:]
    assert max(took.values()) < SECONDS, took


def test_a_resource_uri_with_a_node_number_past_pythons_limit_is_refused(
    home: Path, spawns
) -> None:
    recorded_job(home)

    async def scenario(client: Client) -> None:
        for node in ("9" * 5000, "1" * 4301):
            FIGURES["hostile inputs"] += 1
            with pytest.raises(MCPError) as refused:
                await client.read_resource(f"anylaunch://jobs/job00001/logs/{node}")
            assert "Exceeds the limit" not in str(refused.value), refused.value

    log = serve(home, scenario)
    assert count_tracebacks(log) == 0, log[-3000:]


TWO_STEPS = """
launcher: none
steps:
  one:
    command: [bash, -c, "echo one"]
  two:
    needs: [one]
    command: [bash, -c, "echo two"]
"""


def test_a_read_only_server_reports_a_dead_controller_and_starts_nothing(
    home: Path, tmp_path: Path, spawns
) -> None:
    """`status` of a workflow whose controller died would start a new controller, which
    submits the next step: a read-only server only says that one is needed."""
    import subprocess

    from anylaunch import workflow
    from anylaunch.store import Store
    from anylaunch.workflow import record as wfrecord

    path = tmp_path / "wf.yaml"
    path.write_text(TWO_STEPS)
    wf = workflow.load(str(path))
    store = Store(home)
    wf_id = wfrecord.add(wf, wf.order(), wfrecord.CONTROLLED, store, keyed=True)
    gone = subprocess.run(
        [sys.executable, "-c", "import json; from anylaunch.store import this_process;"
         " print(json.dumps(this_process()))"],
        capture_output=True, text=True, check=True, env=cli_env(home),
    )  # fmt: skip
    assert store.claim_controller(wf_id, json.loads(gone.stdout))
    answers: list[dict[str, Any]] = []

    async def scenario(client: Client) -> None:
        for _ in range(2):
            result = await client.call_tool("status", {"id": wf_id})
            assert not result.is_error, result.content
            answers.append(json.loads(result.content[0].text))
            await anyio.sleep(1.5)  # a controller started by the first call would submit

    serve(home, scenario, read_only=True)
    FIGURES["hostile inputs"] += 1
    assert store.list(limit=None) == [], "a read-only server submitted a step"
    assert not (home / "workflows" / f"{wf_id}.log").exists()
    for answer in answers:
        assert answer["state"] == "PENDING", answer
        assert answer["controller"] is False and answer["needs_controller"] is True, answer
    store.close()


WORKFLOW_OPTIONS = {
    "overrides": {"overrides": ["steps.one.nodes=2"]},
    "backend": {"backend": "local"},
    "command": {"command": ["echo", "hi"]},
}


@pytest.mark.parametrize("given", sorted(WORKFLOW_OPTIONS))
def test_a_workflow_refuses_job_options_over_mcp_as_the_cli_does(
    given: str, home: Path, tmp_path: Path, spawns
) -> None:
    path = tmp_path / "wf.yaml"
    path.write_text(TWO_STEPS)
    options = WORKFLOW_OPTIONS[given]

    async def scenario(client: Client) -> None:
        for tool in ("dry_run", "run"):
            FIGURES["hostile inputs"] += 1
            error = error_of(await client.call_tool(tool, {"file": str(path), **options}))
            assert error["code"] == "USAGE", error
            assert "write them in its steps" in error["message"], error

    serve(home, scenario)
    from anylaunch.store import Store

    store = Store(home)
    assert store.list(limit=None) == [] and store.workflows() == []
    store.close()


LITERAL = "literal-token-9f8e7d6c5b4a"


def test_a_secret_written_literally_in_job_text_is_masked_by_every_later_reader(
    home: Path, tmp_path: Path, spawns
) -> None:
    """The value is known to the call that carried the text; the job's later readers
    (other calls, other processes, the dashboard) must mask it too, and nothing another
    user can read holds it."""
    import subprocess

    text = (
        "launcher: none\n"
        "command: [bash, -c, 'echo token=$MY_TOKEN; echo $MY_TOKEN >&2; exit 3']\n"
        f"env: {{MY_TOKEN: {LITERAL}}}\n"
    )
    seen: list[str] = []

    async def scenario(client: Client) -> None:
        started = await client.call_tool("run", {"yaml": text})
        assert not started.is_error, started.content
        seen.append(started.content[0].text)
        job_id = json.loads(started.content[0].text)["id"]
        await client.call_tool("wait", {"job_id": job_id, "timeout_s": 60})
        seen.append(job_id)

    serve(home, scenario)
    job_id = seen.pop()

    async def later(client: Client) -> None:  # another session: it never saw the text
        for tool, args in [
            ("logs", {"job_id": job_id}),
            ("logs", {"job_id": job_id, "tail": 1}),
            ("logs", {"job_id": job_id, "since": 2}),
            ("diagnose", {"job_id": job_id}),
            ("status", {"id": job_id}),
        ]:
            result = await client.call_tool(tool, args)
            seen.append(result.content[0].text)
        for what in ("logs", "logs/0", "diagnosis", "plan"):
            resource = await client.read_resource(f"anylaunch://jobs/{job_id}/{what}")
            seen.append(resource.contents[0].text)

    serve(home, later)
    env = cli_env(home)
    env.pop("MY_TOKEN", None)
    for args in (
        ["logs", job_id], ["logs", job_id, "--json"], ["logs", job_id, "--tail", "1"],
        ["logs", job_id, "--since", "3", "--json"], ["diagnose", job_id],
        ["diagnose", job_id, "--json"], ["status", job_id, "--json"],
    ):  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", "anylaunch", *args], capture_output=True, text=True, env=env
        )
        seen.append(done.stdout + done.stderr)

    from starlette.testclient import TestClient

    from anylaunch.ui.app import create_app
    from anylaunch.ui.masking import Masker

    app = create_app(home, "action", Masker({}))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        for page in (f"/jobs/{job_id}", f"/jobs/{job_id}/logs"):
            seen.append(client.get(page).text)
    FIGURES["hostile inputs"] += len(seen)
    assert any("token=***" in s for s in seen), seen  # the log was read, and masked
    shown = [s for s in seen if LITERAL in s]
    assert shown == [], shown[0][:2000]
    # On disk: nothing another user can read holds the value.
    for path in home.rglob("*"):
        if path.is_file() and LITERAL.encode() in path.read_bytes():
            inside = [p for p in (path, *path.parents) if p == home or home in p.parents]
            assert any(p.stat().st_mode & 0o077 == 0 for p in inside), path
            assert path.name not in ("jobs.db", "plan.json"), path
