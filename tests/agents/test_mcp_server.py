"""`anylaunch mcp` driven through the protocol by the official SDK's own client over stdio:
the tools an agent sees, a job run detached and polled to its end, its logs, a failing
job's diagnosis, cancel on the Lepton emulator, the read-only server, and secrets."""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest

from helpers import free_port

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "docs" / "schemas" / "mcp"
PLANTED = "hf_planted-3b9d7c1e0a5f"
READING = {"dry_run", "preflight", "ps", "status", "logs", "wait", "diagnose", "stack",
           "list_resource_shapes", "get_volumes"}  # fmt: skip
CHANGING = {"run", "cancel", "retry_failed", "exec", "shell", "forward"}
# Opens a port to a node and changes nothing there: no confirmation needed.
HARMLESS_CHANGES = {"forward"}


class Agent:
    """What a coding agent holds: a connected client, and every text the server sent it."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.seen: list[str] = []

    async def call(self, tool: str, **arguments: Any) -> Any:
        result = await self.client.call_tool(tool, arguments)
        self.seen += [c.text for c in result.content if hasattr(c, "text")]
        assert not result.is_error, f"{tool}: {result.content}"
        # The structured result is the object `--json` prints, as the schema says.
        schema = json.loads((SCHEMAS / f"{tool}.json").read_text())
        jsonschema.validate(result.structured_content, schema)
        text = json.loads(result.content[0].text)
        wrapped = result.structured_content
        assert text == (wrapped["result"] if set(wrapped) == {"result"} else wrapped)
        return text

    async def error(self, tool: str, **arguments: Any) -> dict[str, Any]:
        result = await self.client.call_tool(tool, arguments)
        self.seen += [c.text for c in result.content if hasattr(c, "text")]
        assert result.is_error, f"{tool} should have failed: {result.content}"
        body = json.loads(result.content[0].text)
        jsonschema.validate(body, json.loads((SCHEMAS.parent / "error.json").read_text()))
        return body["error"]

    async def read(self, uri: str) -> str:
        result = await self.client.read_resource(uri)
        text = result.contents[0].text
        self.seen.append(text)
        return text

    async def until_done(self, job_id: str) -> dict[str, Any]:
        """Poll with bounded waits, as an agent does."""
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            job = await self.call("wait", job_id=job_id, timeout_s=20)
            if job["state"] in ("SUCCEEDED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED"):
                return job
        raise AssertionError(f"job {job_id} still {job['state']}")


def drive(
    env: dict[str, str], scenario: Callable[[Agent], Awaitable[None]], *, read_only: bool = False
) -> Agent:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "anylaunch", "mcp", *(["--read-only"] if read_only else [])],
        env=env,
        cwd=str(ROOT),
    )
    holder: list[Agent] = []
    log = Path(env["ANYLAUNCH_HOME"]).parent / "mcp-server.log"

    async def main() -> None:
        with log.open("a") as errlog:
            async with Client(stdio_client(server, errlog=errlog)) as client:
                agent = Agent(client)
                holder.append(agent)
                await scenario(agent)

    anyio.run(main)
    agent = holder[0]
    agent.seen.append(log.read_text())  # the server's own log is read by people too
    assert "tool run" in agent.seen[-1] or read_only
    return agent


@pytest.fixture
def server_env(home, tmp_path, spawns) -> dict[str, str]:
    """The environment an agent's host gives the server (the client passes no other)."""
    return {
        "ANYLAUNCH_HOME": str(home),
        "PATH": os.environ["PATH"],
        "HF_TOKEN": PLANTED,
        "CHECKPOINT_DIR": str(tmp_path / "ckpt"),
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }


def failing_program(tmp_path: Path) -> Path:
    path = tmp_path / "train_oom.py"
    path.write_text(
        textwrap.dedent(
            """
            import sys
            print("step 1 loss 2.3", flush=True)
            print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB"
                  " (GPU 0; 79.15 GiB total capacity)", flush=True)
            sys.exit(1)
            """
        )
    )
    return path


def token_program(tmp_path: Path) -> Path:
    path = tmp_path / "show_token.py"
    path.write_text("import os\nprint('token is', os.environ['HF_TOKEN'], flush=True)\n")
    return path


def test_agent_runs_the_demo_locally_polls_it_reads_logs_and_gets_a_failure_diagnosis(
    server_env, tmp_path, torch
):
    failing = failing_program(tmp_path)
    shows_token = token_program(tmp_path)

    async def scenario(agent: Agent) -> None:
        tools = {t.name: t for t in (await agent.client.list_tools()).tools}
        assert set(tools) == READING | CHANGING
        for name in CHANGING:
            assert tools[name].annotations.destructive_hint is (name not in HARMLESS_CHANGES)
            assert tools[name].annotations.read_only_hint is False
        for name in READING:
            assert tools[name].annotations.read_only_hint is True
        assert "file" in tools["run"].input_schema["properties"]

        demo = str(ROOT / "examples" / "ddp_demo.yaml")
        cheap = ["nodes=1", "ranks_per_node=2"]
        plan = await agent.call("dry_run", file=demo, overrides=cheap)
        assert plan["backend"] == "local" and plan["plan"]["name"] == "ddp-demo"

        job = await agent.call("run", file=demo, overrides=cheap)
        assert job["state"] in ("PENDING", "STARTING", "RUNNING")  # returned at once
        done = await agent.until_done(job["id"])
        assert done["state"] == "SUCCEEDED" and done["exit_code"] == 0
        logs = await agent.call("logs", job_id=job["id"])
        assert "loss" in logs["text"]
        more = await agent.call("logs", job_id=job["id"], since=logs["offset"])
        assert more["text"] == "" and more["offset"] == logs["offset"]
        assert (await agent.call("status", id=job["id"]))["events"]
        assert job["id"] in [j["id"] for j in await agent.call("ps")]

        bad = await agent.call(
            "run", yaml=f"name: oom-job\ncommand: python {failing}\nlauncher: none\n"
        )
        assert (await agent.until_done(bad["id"]))["state"] == "FAILED"
        diagnosis = await agent.call("diagnose", job_id=bad["id"])
        assert diagnosis["code"] == "OOM_GPU"
        assert any("CUDA out of memory" in e["text"] for e in diagnosis["evidence"])
        assert "OOM_GPU" in await agent.read(f"anylaunch://jobs/{bad['id']}/diagnosis")
        assert "CUDA out of memory" in await agent.read(f"anylaunch://jobs/{bad['id']}/logs/0")
        assert '"payload"' in await agent.read(f"anylaunch://jobs/{bad['id']}/plan")
        # The inline job file was saved and is the job's recorded source.
        saved = list((Path(server_env["ANYLAUNCH_HOME"]) / "jobfiles").glob("*.yaml"))
        assert len(saved) == 1 and "oom-job" in saved[0].read_text()

        leak = await agent.call(
            "run",
            yaml=f"name: leak\ncommand: python {shows_token}\nlauncher: none\n"
            "env:\n  HF_TOKEN: ${HF_TOKEN}\n",
        )
        assert (await agent.until_done(leak["id"]))["state"] == "SUCCEEDED"
        assert "token is ***" in (await agent.call("logs", job_id=leak["id"]))["text"]
        await agent.read(f"anylaunch://jobs/{leak['id']}/logs")
        await agent.call("status", id=leak["id"])
        await agent.call(
            "dry_run", yaml=f"command: python {shows_token}\nenv:\n  HF_TOKEN: x{PLANTED}\n"
        )

        missing = await agent.error("status", id="nosuchjob")
        assert missing["code"] == "JOB_NOT_FOUND"
        bad_file = await agent.error("run", yaml="nodes: 0\ncommand: x\n")
        assert bad_file["code"] == "CONFIG" and ":1: nodes:" in bad_file["message"]
        bad_args = await agent.error("logs", job_id=job["id"], tail=-1)
        assert bad_args["code"] == "USAGE" and "tail" in bad_args["message"]

    agent = drive(server_env, scenario)
    everything = "\n".join(agent.seen)
    assert PLANTED not in everything
    assert "Traceback" not in everything


def test_read_only_server_offers_only_reading_tools_and_refuses_run(server_env, write):
    path = write("command: python -c pass\nlauncher: none\n")

    async def scenario(agent: Agent) -> None:
        tools = {t.name for t in (await agent.client.list_tools()).tools}
        assert tools == READING
        refused = await agent.error("run", file=str(path))
        assert refused["code"] == "READ_ONLY" and "--read-only" in refused["message"]
        assert await agent.call("ps") == []  # nothing was submitted
        for tool, arguments in (
            ("exec", {"job_id": "abc", "command": ["true"]}),
            ("shell", {"job_id": "abc", "input": "true"}),
            ("forward", {"job_id": "abc", "port": 8080}),
        ):
            refused = await agent.error(tool, **arguments)
            assert refused["code"] == "READ_ONLY", tool

    drive(server_env, scenario, read_only=True)


def test_agent_runs_on_the_lepton_emulator_and_cancels(
    server_env, tmp_path, home, torch, lepton_server
):
    failing = failing_program(tmp_path)
    with lepton_server.open(state_dir=tmp_path / "emulator", seed=7) as emu:
        # Replicas see only their image and mounts: the programs go on the node group's
        # Lustre volume, which jobs on that group see at /mnt/lustre.
        volume = emu.world.volumes / "lustre" / "fsw" / "portfolios" / "edgeai"
        volume.mkdir(parents=True)
        shutil.copy(ROOT / "examples" / "ddp_demo.py", volume)
        shutil.copy(failing, volume)
        env = {**server_env, **emu.env(), "NGC_KEY": "ngc-key-planted-0042"}
        lepton_secrets = [emu.token, "ngc-key-planted-0042"]

        async def scenario(agent: Agent) -> None:
            shapes = await agent.call("list_resource_shapes")
            assert shapes and all(s["gpu_count"] >= 0 for s in shapes.values())
            volumes = await agent.call("get_volumes")
            assert isinstance(volumes, list)

            demo = str(ROOT / "examples" / "ddp_demo.yaml")
            lepton = [
                "nodes=1",
                "ranks_per_node=2",
                "image=nvcr.io/nvidia/pytorch:25.08-py3",
                "lepton.dedicated_node_group=h100-pool",
            ]
            script = "/mnt/lustre/ddp_demo.py"
            command = ["python", script, "--steps", "5", "--checkpoint-dir", "/mnt/lustre/c"]
            job = await agent.call(
                "run", file=demo, overrides=lepton, command=command, backend="lepton"
            )
            assert job["backend"] == "lepton" and job["native_id"]
            done = await agent.until_done(job["id"])
            assert done["state"] == "SUCCEEDED", await agent.call("logs", job_id=job["id"])
            assert "loss" in (await agent.call("logs", job_id=job["id"], node=0))["text"]

            bad = await agent.call(
                "run",
                yaml=f"name: oom-job\nimage: python:3.11\ncommand: python3 /mnt/lustre/{failing.name}\n"
                "launcher: none\nlepton: {dedicated_node_group: h100-pool}\n",
            )
            assert (await agent.until_done(bad["id"]))["state"] == "FAILED"
            diagnosis = await agent.call("diagnose", job_id=bad["id"])
            assert diagnosis["code"] == "OOM_GPU" and diagnosis["evidence"]

            sleeper = await agent.call(
                "run",
                yaml="name: sleeper\nimage: python:3.11\n"
                "command: python3 -c 'import time; time.sleep(600)'\n"
                "launcher: none\nlepton: {}\n",
            )
            stopped = await agent.call("cancel", job_ids=[sleeper["id"]])
            assert stopped["state"] == "CANCELLED"
            assert (await agent.call("diagnose", job_id=sleeper["id"]))["code"] == "CANCELLED"

        agent = drive(env, scenario)
    everything = "\n".join(agent.seen)
    for secret in [PLANTED, *lepton_secrets]:
        assert secret not in everything


def test_agent_runs_a_workflow_polls_its_graph_and_retries_the_failed_split(server_env, tmp_path):
    marker = tmp_path / "failed-once"
    text = textwrap.dedent(
        f"""
        name: agent-wf
        launcher: none
        steps:
          make:
            splits: 2
            command: [bash, -c, 'if [ "$SPLIT_ID" = 1 ] && [ ! -e {marker} ]; then touch {marker}; exit 3; fi']
          use:
            needs: [make]
            command: [bash, -c, "echo used"]
        """
    )
    env = {**server_env, "ANYLAUNCH_WORKFLOW_POLL_S": "0.3"}

    async def until_ended(agent: Agent, wf_id: str) -> dict[str, Any]:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            found = await agent.call("status", id=wf_id)
            if found["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
                return found
            await anyio.sleep(0.5)
        raise AssertionError(f"workflow {wf_id} did not end")

    async def scenario(agent: Agent) -> None:
        plan = await agent.call("dry_run", yaml=text)
        assert plan["kind"] == "workflow" and plan["order"] == ["make", "use"]
        started = await agent.call("run", yaml=text)
        assert started["kind"] == "workflow" and started["id"].startswith("wf-")
        first = await until_ended(agent, started["id"])
        assert [s["state"] for s in first["steps"]] == ["FAILED", "BLOCKED"]
        again = await agent.call("retry_failed", run_id=started["id"])
        assert again["id"] == started["id"]
        done = await until_ended(agent, started["id"])
        assert done["state"] == "SUCCEEDED"
        assert [len(s["attempts"]) for s in done["steps"][0]["splits"]] == [1, 2]

    drive(env, scenario)


def test_agent_reaches_a_running_job_stack_exec_shell_and_forward(server_env, write, tmp_path):
    """Every live tool on a local job whose node runs one rank stuck in a loop (launcher
    none: no torch needed), its secret masked in everything that comes back."""
    program = ROOT / "tests" / "programs" / "stuck.py"
    port = free_port()
    path = write(
        f"command: export RANK=$NODE_RANK; exec python {program}\nlauncher: none\n"
        f"env:\n  HF_TOKEN: ${{HF_TOKEN}}\n  SERVE_PORT: {port}\n"
    )

    async def scenario(agent: Agent) -> None:
        job = await agent.call("run", file=str(path))
        for _ in range(600):
            text = (await agent.call("logs", job_id=job["id"]))["text"]
            if "ready rank=0" in text:
                break
            await anyio.sleep(0.2)
        stacks = await agent.call("stack", job_id=job["id"])
        assert [r["rank"] for r in stacks["ranks"]] == [0]
        assert "stuck_in_the_loop" in stacks["ranks"][0]["stack"]
        ran = await agent.call("exec", job_id=job["id"], command=["sh", "-c", "echo $HF_TOKEN"])
        assert (ran["exit_code"], ran["stdout"]) == (0, "***\n")
        typed = await agent.call("shell", job_id=job["id"], input="echo tok=$HF_TOKEN; exit 5")
        assert typed["exit_code"] == 5 and "tok=***" in typed["output"]
        opened = await agent.call("forward", job_id=job["id"], port=port, local_port=0, seconds=60)
        body = await anyio.to_thread.run_sync(_get, opened["url"])
        assert body == b"node 0\n"
        await agent.call("cancel", job_ids=[job["id"]])

    agent = drive(server_env, scenario)
    assert PLANTED not in "\n".join(agent.seen)


def _get(url: str) -> bytes:
    import urllib.request

    with urllib.request.urlopen(url, timeout=10) as page:
        return page.read()
