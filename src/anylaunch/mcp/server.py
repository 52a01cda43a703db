"""The stdio MCP server: tools from `tools.TOOLS`, and each job's plan, logs and diagnosis
as resources.

Built on the SDK's low-level `Server` rather than its decorator layer: the input and
output schemas are the contract models' own (not derived again from a signature), and
every failure becomes a tool error carrying the CLI's error object, never the SDK's
generic "internal error" nor a traceback. Operations block (a poll, a wait), so each runs
in a worker thread and the server keeps answering.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from anylaunch.contract import commands
from anylaunch.errors import AnylaunchError, error_json
from anylaunch.jobfile.secrets import is_secret_name, mask, mask_data
from anylaunch.mcp.tools import BY_NAME, TOOLS, ToolSpec
from anylaunch.observe import watch
from anylaunch.store import Store

log = logging.getLogger("anylaunch.mcp")
_Result = TypeVar("_Result")

# A node is at most a few digits (a job has at most 10,000 nodes): a longer number is no
# node, and Python refuses to read one of over 4,300 digits at all.
JOB_URI = re.compile(
    r"^anylaunch://jobs/(?P<id>[0-9a-z]{1,64})/(?P<what>plan|diagnosis|logs)(?:/(?P<node>[0-9]{1,9}))?$"
)
# How many of the newest jobs `resources/list` names (every job stays readable by URI).
LISTED_JOBS = 20


def secrets(extra: list[str] | None = None) -> list[str]:
    """Every secret value this process knows: secret-named variables of its environment."""
    values = [v for k, v in os.environ.items() if is_secret_name(k)]
    return values + (extra or [])


def _inline_secrets(arguments: dict[str, Any]) -> list[str]:
    """Secret values written into a job file's text itself (entries with secret names).

    The text is read as every job text is (`loader.parse_text`: its size, values,
    nesting and aliases bounded) before anything walks it; text that cannot be read
    raises the ConfigError the tool itself would."""
    text = arguments.get("yaml")
    if not isinstance(text, str):
        return []
    from anylaunch.jobfile.loader import parse_text

    data = parse_text(text, "<yaml>").data
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(value, str | int) and is_secret_name(str(key)):
                    found.append(str(value))
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(data)
    return found


def _masked(value: Any, hidden: list[str]) -> Any:
    return mask_data(value, hidden)


def _json_text(value: Any) -> str:
    return json.dumps(value, indent=2, default=str)  # what `--json` prints


def _error(exc: BaseException, hidden: list[str]) -> types.CallToolResult:
    """The CLI's `--json` error object as a tool error (the model reads it and can fix it)."""
    if isinstance(exc, AnylaunchError):
        body = exc.to_json()
    else:  # a bug of ours, or a library's: its kind and message, never a traceback
        body = error_json("INTERNAL", f"{type(exc).__name__}: {exc}")
    body = _masked(body, hidden)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=_json_text(body))], is_error=True
    )


def call(
    tool: ToolSpec, arguments: dict[str, Any], *, read_only: bool = False
) -> types.CallToolResult:
    """Run one tool synchronously; its result, or its error, masked. On a read-only server
    even a reading tool starts nothing (a dead workflow controller is reported, not
    replaced)."""
    from anylaunch.workflow import controller

    hidden = secrets()
    try:
        hidden += _inline_secrets(arguments)
        with controller.observing() if read_only else contextlib.nullcontext():
            result = tool.call(commands.parse(tool.arguments, arguments))
    except Exception as exc:
        log.warning("tool %s failed: %s", tool.name, getattr(exc, "code", type(exc).__name__))
        return _error(exc, hidden)
    result = _masked(json.loads(json.dumps(result, default=str)), hidden)
    log.info("tool %s ok", tool.name)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=_json_text(result))],
        structured_content=tool.structured(result),
    )


def describe(tool: ToolSpec) -> types.Tool:
    return types.Tool(
        name=tool.name,
        title=tool.title,
        description=tool.description,
        input_schema=tool.input_schema(),
        output_schema=tool.output_schema(),
        annotations=types.ToolAnnotations(
            title=tool.title,
            read_only_hint=tool.reads,
            destructive_hint=tool.destructive,
            idempotent_hint=tool.reads,
            open_world_hint=tool.open_world,
        ),
    )


# -- resources ------------------------------------------------------------------------


def read_job_resource(uri: str) -> tuple[str, str]:
    """(mime type, text) of a job's plan, logs (all nodes or one) or diagnosis."""
    match = JOB_URI.match(uri)
    if match is None:
        raise MCPError(types.INVALID_PARAMS, f"unknown resource {uri}", {"uri": uri})
    job = watch.get(match["id"])
    what = match["what"]
    hidden = job.secrets()
    if what == "plan":
        return "application/json", mask(_json_text(job.record.plan), hidden)
    if what == "diagnosis":
        return "application/json", mask(_json_text(job.diagnose().to_json(job.id)), hidden)
    node = int(match["node"]) if match["node"] is not None else None
    return "text/plain", job.logs(node=node)


def job_resources() -> list[types.Resource]:
    store = Store()
    try:
        records = store.list(limit=LISTED_JOBS)
    finally:
        store.close()
    out = []
    for record in records:
        base = f"anylaunch://jobs/{record.id}"
        label = f"{record.name} ({record.id}, {record.backend}, {record.state.value})"
        out += [
            types.Resource(
                uri=f"{base}/plan", name=f"plan of {label}", mime_type="application/json"
            ),
            types.Resource(uri=f"{base}/logs", name=f"logs of {label}", mime_type="text/plain"),
            types.Resource(
                uri=f"{base}/diagnosis", name=f"diagnosis of {label}", mime_type="application/json"
            ),
        ]
    return out


TEMPLATES = [
    types.ResourceTemplate(
        uri_template="anylaunch://jobs/{job_id}/plan",
        name="job plan",
        description="The exact plan a job submitted (secrets by name only).",
        mime_type="application/json",
    ),
    types.ResourceTemplate(
        uri_template="anylaunch://jobs/{job_id}/logs/{node}",
        name="job logs of one node",
        description="One node's output (node 0 is the first).",
        mime_type="text/plain",
    ),
    types.ResourceTemplate(
        uri_template="anylaunch://jobs/{job_id}/diagnosis",
        name="job diagnosis",
        description="Why the job failed, with the evidence lines.",
        mime_type="application/json",
    ),
]


# -- the server -----------------------------------------------------------------------


def _fixed(
    result: _Result,
) -> Callable[[ServerRequestContext[Any], types.PaginatedRequestParams | None], Awaitable[_Result]]:
    """A list handler whose answer does not change while the server runs."""

    async def answer(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> _Result:
        return result

    return answer


def build(*, read_only: bool = False) -> Server[Any]:
    offered = [t for t in TOOLS if t.reads or not read_only]
    listed = [describe(t) for t in offered]
    names = {t.name for t in offered}

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        if params.name not in names:
            why = (
                f"'{params.name}' changes or spends: this server was started with --read-only"
                " — start `anylaunch mcp` without --read-only to allow it"
                if params.name in BY_NAME
                else f"no tool '{params.name}' — use one of: {', '.join(sorted(names))}"
            )
            body = error_json("READ_ONLY" if params.name in BY_NAME else "USAGE", why)
            log.warning("tool %s refused", params.name)
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=_json_text(body))], is_error=True
            )
        tool = BY_NAME[params.name]
        return await anyio.to_thread.run_sync(
            functools.partial(call, tool, arguments, read_only=read_only)
        )

    async def list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=await anyio.to_thread.run_sync(job_resources))

    async def read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        try:
            mime, text = await anyio.to_thread.run_sync(read_job_resource, uri)
        except AnylaunchError as exc:
            raise MCPError(
                types.INVALID_PARAMS, mask(exc.message, secrets()), {"uri": uri}
            ) from None
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(uri=uri, mime_type=mime, text=mask(text, secrets()))
            ]
        )

    from importlib.metadata import version

    return Server(
        "anylaunch",
        version=version("anylaunch"),
        instructions=(
            "Launch and watch GPU training jobs (local torchrun, Slurm, SkyPilot, DGX Cloud"
            " Lepton). dry_run or preflight first; run returns at once; poll with wait; read"
            " diagnose before retrying; retry_failed resubmits only failed splits."
        ),
        on_list_tools=_fixed(types.ListToolsResult(tools=listed)),
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=_fixed(
            types.ListResourceTemplatesResult(resource_templates=TEMPLATES)
        ),
        on_read_resource=read_resource,
    )


class _MaskSecrets(logging.Filter):
    """The server's own log goes through `mask` too, whichever library wrote the line."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = mask(record.getMessage(), secrets())
        record.args = None
        return True


def serve(*, read_only: bool = False) -> None:
    """Serve over stdin/stdout until the client closes the connection."""
    handler = logging.StreamHandler()  # stderr: stdout carries the protocol
    handler.setFormatter(logging.Formatter("anylaunch mcp: %(name)s: %(message)s"))
    handler.addFilter(_MaskSecrets())
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    log.setLevel(logging.INFO)
    server = build(read_only=read_only)

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)
