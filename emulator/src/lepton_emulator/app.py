"""HTTP routes of the emulated workspace API (paths and JSON as in SDK 0.47.1).

One server serves any number of workspaces, each its own World at its own
`/api/v2/workspaces/<id>` with its own tokens, as Lepton serves many. Every workspace
route goes through `_api`: Bearer token check (401 a token of no workspace or none, 403 a
token of another workspace), then the HTTP faults of that workspace that match
"METHOD /path", then the handler. Handlers that may block (stopping a job waits for its
processes) run in a thread.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from lepton_emulator import catalog, selectors
from lepton_emulator.faults import Fault
from lepton_emulator.jobs import JobRun
from lepton_emulator.validate import Invalid
from lepton_emulator.world import World

Handler = Callable[[Request, World], Awaitable[Response]]
BASE = "/api/v2/workspaces/{ws}"


def error(status: int, code: str, message: str, **headers: str) -> JSONResponse:
    return JSONResponse({"code": code, "message": message}, status_code=status, headers=headers)


_CODES = {
    400: "InvalidRequest",
    404: "ResourceNotFound",
    409: "ResourceConflict",
    429: "TooManyRequests",
}


def _fault_response(fault: Fault) -> Response:
    headers = {}
    if fault.retry_after is not None:
        headers["Retry-After"] = str(
            int(fault.retry_after) if fault.retry_after.is_integer() else fault.retry_after
        )
    if fault.status in (401, 403):
        return error(
            fault.status, "Unauthorized" if fault.status == 401 else "Forbidden", "token rejected"
        )
    code = _CODES.get(fault.status, "InternalFailure")
    return error(fault.status, code, "injected fault", **headers)


class ConnectionDropped(Exception):
    """Raised after the status line went out: the server closes the connection."""


class _Dropped(Response):
    """Headers promising a body, then a broken connection: what a client sees when a
    gateway or load balancer dies after the backend already did the work."""

    def __init__(self) -> None:
        super().__init__(status_code=200)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"64")],
            }
        )
        await send({"type": "http.response.body", "body": b'{"metadata": {', "more_body": True})
        raise ConnectionDropped("injected fault: connection dropped")


def _quiet_dropped(record: logging.LogRecord) -> bool:
    """uvicorn logs every exception of the app; an injected drop is not news."""
    return not (record.exc_info and isinstance(record.exc_info[1], ConnectionDropped))


logging.getLogger("uvicorn.error").addFilter(_quiet_dropped)


def _bearer(request: Request) -> str:
    auth = request.headers.get("authorization", "")
    return auth[7:] if auth.lower().startswith("bearer ") else ""


def _world_of(request: Request, token: str) -> World | None:
    """The served workspace that accepts `token`, if any."""
    worlds: dict[str, World] = request.app.state.worlds
    return next((w for w in list(worlds.values()) if token and token in w.tokens), None)


def _api(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    @functools.wraps(handler)
    async def endpoint(request: Request) -> Response:
        rid = secrets.token_hex(8)
        token = _bearer(request)
        rel = request.url.path.split(f"/workspaces/{request.path_params['ws']}", 1)[1] or "/"
        world = request.app.state.worlds.get(request.path_params["ws"])
        if world is None or token not in world.tokens:
            if _world_of(request, token) is None:
                return error(401, "Unauthorized", "invalid or missing workspace token")
            return error(403, "Forbidden", "token is not valid for this workspace")
        fault = world.faults.for_request(request.method, rel)
        if fault is not None and fault.kind == "http":
            return _fault_response(fault)
        if fault is not None and fault.kind == "slow":
            await asyncio.sleep(fault.delay_s)
        response = await handler(request, world)
        if fault is not None and fault.kind == "http_after":
            return _fault_response(fault)  # done, but the answer is lost on the way
        if fault is not None and fault.kind == "drop":
            return _Dropped()  # done, and the connection breaks before the answer
        if fault is not None and fault.kind == "truncate" and isinstance(response, JSONResponse):
            return Response(
                bytes(response.body)[: max(1, len(response.body) // 2)],
                200,
                media_type="application/json",
            )
        response.headers["x-request-id"] = rid
        return response

    return endpoint


def _job_or_404(world: World, request: Request, mode: str | None = None) -> Any:
    job = world.get(
        request.path_params["job_id"],
        mode or request.query_params.get("job_query_mode", "alive_and_archive"),
    )
    if job is None:
        raise _NotFound(f"job {request.path_params['job_id']} not found")
    return job


class _NotFound(Exception):
    pass


def _catch(handler: Handler) -> Handler:
    @functools.wraps(handler)
    async def wrapped(request: Request, world: World) -> Response:
        try:
            return await handler(request, world)
        except _NotFound as exc:
            return error(404, "ResourceNotFound", str(exc))
        except Invalid as exc:
            return error(400, "ValidationError", str(exc))

    return wrapped


def _counted(name: str, handler: Handler) -> Handler:
    """Count served requests per route, so tests can tell how many calls a client made."""

    @functools.wraps(handler)
    async def wrapped(request: Request, world: World) -> Response:
        world.calls[name] += 1
        return await handler(request, world)

    return wrapped


def route(path: str, methods: list[str]) -> Callable[[Handler], Route]:
    def deco(handler: Handler) -> Route:
        return Route(
            BASE + path, _api(_catch(_counted(f"{methods[0]} {path}", handler))), methods=methods
        )

    return deco


# -- jobs ---------------------------------------------------------------------------


@route("/jobs", ["POST"])
async def create_job(request: Request, world: World) -> Response:
    try:
        body = await request.json()
    except ValueError:
        return error(400, "InvalidRequest", "body is not JSON")
    job = await run_in_threadpool(world.create, body, "user@example.com")
    with world.lock:
        return JSONResponse(job.as_json())


@route("/jobs", ["GET"])
async def list_jobs(request: Request, world: World) -> Response:
    q = request.query_params
    with world.lock:
        jobs = world.list(q.get("job_query_mode", "alive_only"))
        if q.get("q"):
            jobs = [j for j in jobs if q["q"] in j.id or q["q"] in j.name]
        if q.get("query"):
            try:
                match = selectors.parse(q["query"])
            except selectors.BadSelector as exc:
                return error(400, "InvalidRequest", str(exc))
            jobs = [j for j in jobs if match(j.metadata.get("labels") or {})]
        states = q.getlist("status")
        if states:
            jobs = [j for j in jobs if j.state in states]
        groups = q.getlist("node_groups")
        if groups:
            jobs = [
                j
                for j in jobs
                if set(groups)
                & set((j.spec.get("affinity") or {}).get("allowed_dedicated_node_groups") or [])
            ]
        if q.get("created_by"):
            jobs = [j for j in jobs if j.owner == q["created_by"]]
        if q.get("page"):
            size = int(q.get("page_size", "50"))
            start = (int(q["page"]) - 1) * size
            jobs = jobs[start : start + size]  # past the last page: an empty list
        return JSONResponse({"jobs": [j.as_json() for j in jobs]})


@route("/jobs/{job_id}", ["PATCH"])
async def patch_job(request: Request, world: World) -> Response:
    body = await request.json()
    stopped = (body.get("spec") or {}).get("stopped")
    with world.lock:
        job = _job_or_404(world, request, "alive_only")
    if stopped is True and job.state not in (
        "Stopped",
        "Completed",
        "Failed",
        "Deleted",
        "Archived",
    ):
        await run_in_threadpool(_locked, world, job.stop)
    elif stopped is False and job.state == "Stopped":
        await run_in_threadpool(_locked, world, job.resume)
    return JSONResponse({})


@route("/jobs/{job_id}", ["DELETE"])
async def delete_job(request: Request, world: World) -> Response:
    with world.lock:
        job = _job_or_404(world, request, request.query_params.get("job_query_mode", "alive_only"))
    await run_in_threadpool(_locked, world, lambda: world.delete(job))
    return JSONResponse({})


def _locked(world: World, func: Callable[[], Any]) -> Any:
    with world.lock:
        return func()


def _job_view(path: str, view: Callable[[JobRun], Any]) -> Route:
    """A GET answering one view of a job, read under the world's lock."""

    async def read(request: Request, world: World) -> Response:
        with world.lock:
            return JSONResponse(view(_job_or_404(world, request)))

    return route(path, ["GET"])(read)


get_job = _job_view("/jobs/{job_id}", JobRun.as_json)
replicas = _job_view("/jobs/{job_id}/replicas", JobRun.replica_json)
events = _job_view(
    "/jobs/{job_id}/events",
    lambda job: sorted(job.events.values(), key=lambda e: e["last_observed_time"]),
)


@route("/jobs/{job_id}/replicas/{replica_id}/log", ["GET"])
async def replica_log(request: Request, world: World) -> Response:
    with world.lock:
        job = _job_or_404(world, request)
        replica = next((r for r in job.replicas if r.id == request.path_params["replica_id"]), None)
        if replica is None:
            return error(404, "ResourceNotFound", "replica not found")
        drop = job.fault("stream_drop")

    async def stream() -> AsyncIterator[bytes]:
        sent, opened = 0, time.time()
        while True:
            lines = replica.lines[sent:]
            if lines:
                sent += len(lines)
                yield "".join(f"{text}\n" for _, text in lines).encode()
            if drop is not None and time.time() - opened >= drop.after_s:
                return  # the connection drops mid-run
            if replica.exit_code is not None or job.state in ("Stopped", "Deleted", "Failed"):
                if sent >= len(replica.lines):
                    return
                continue
            await asyncio.sleep(0.1)

    return StreamingResponse(stream(), media_type="text/plain")


@route("/logs", ["GET"])
async def logs(request: Request, world: World) -> Response:
    q = request.query_params
    if ("start" in q) != ("end" in q):
        return error(400, "InvalidRequest", "give both start and end (ns), or neither")
    if "start" in q:
        try:
            start, end = int(q["start"]), int(q["end"])
            limit = int(q.get("limit", "5000"))
        except ValueError:
            return error(400, "InvalidRequest", "start, end and limit are integers")
    else:
        # No range: Loki's defaults, the last hour and at most 100 lines.
        end = time.time_ns()
        start, limit = end - 3600 * 10**9, int(q.get("limit", "100"))
    with world.lock:
        job = world.get(q.get("job_history_name") or q.get("job", ""))
        result: list[dict[str, Any]] = []
        if job is not None:
            for replica in job.replicas:
                if q.get("replica") and q["replica"] != replica.id:
                    continue
                values = [[str(ts), text] for ts, text in list(replica.lines) if start <= ts <= end]
                if values:
                    result.append(
                        {"stream": {"job": job.id, "replica": replica.id}, "values": values}
                    )
    flat = sorted(
        ((v, s["stream"]) for s in result for v in s["values"]), key=lambda x: int(x[0][0])
    )
    if q.get("direction", "backward") == "backward":
        flat = flat[::-1]
    kept = flat[:limit]
    streams: dict[str, dict[str, Any]] = {}
    for value, labels in kept:
        streams.setdefault(labels["replica"], {"stream": labels, "values": []})["values"].append(
            value
        )
    return JSONResponse(
        {"status": "success", "data": {"resultType": "streams", "result": list(streams.values())}}
    )


# -- node groups, shapes, storage -----------------------------------------------------


@route("/dedicated-node-groups", ["GET"])
async def node_groups(request: Request, world: World) -> Response:
    return JSONResponse(catalog.node_groups(world.workspace))


@route("/dedicated-node-groups/{ng}", ["GET"])
async def node_group(request: Request, world: World) -> Response:
    found = [
        g
        for g in catalog.node_groups(world.workspace)
        if g["metadata"]["id"] == request.path_params["ng"]
    ]
    if not found:
        return error(404, "ResourceNotFound", "node group not found")
    return JSONResponse(found[0])


@route("/dedicated-node-groups/{ng}/nodes", ["GET"])
async def node_group_nodes(request: Request, world: World) -> Response:
    if request.path_params["ng"] != catalog.NODE_GROUP_ID:
        return error(404, "ResourceNotFound", "node group not found")
    return JSONResponse(catalog.nodes(catalog.NODE_GROUP_ID))


@route("/shapes", ["GET"])
async def shapes(request: Request, world: World) -> Response:
    purpose = request.query_params.get("purpose")
    items = [s for s in catalog.shapes() if not purpose or purpose in s["spec"]["listable_in"]]
    return JSONResponse(items)


@route("/storage-permission/{volume}", ["GET"])
async def storage_permission(request: Request, world: World) -> Response:
    volume = request.path_params["volume"]
    if volume not in catalog.volume_names():
        return error(404, "ResourceNotFound", f"volume {volume} not found")
    return JSONResponse(
        catalog.storage_permissions(volume, request.query_params.get("nodegroup_id"))
    )


# -- secrets, workspace -----------------------------------------------------------------


@route("/usersecrets", ["GET"])
async def list_secrets(request: Request, world: World) -> Response:
    with world.lock:
        return JSONResponse(
            [{"name": n, "owner": "user@example.com"} for n in sorted(world.secrets)]
        )


@route("/usersecrets", ["POST"])
async def put_secrets(request: Request, world: World) -> Response:
    body = await request.json()
    if not isinstance(body, list) or not all(isinstance(i, dict) and i.get("name") for i in body):
        return error(400, "InvalidRequest", "body must be a list of {name, value}")
    with world.lock:
        for item in body:
            world.secrets[item["name"]] = str(item.get("value") or "")
    return JSONResponse({})


@route("/usersecrets/{name}", ["DELETE"])
async def delete_secret(request: Request, world: World) -> Response:
    with world.lock:
        if world.secrets.pop(request.path_params["name"], None) is None:
            return error(404, "ResourceNotFound", "secret not found")
    return JSONResponse({})


@route("/imagepullsecrets", ["GET"])
async def list_pull_secrets(request: Request, world: World) -> Response:
    with world.lock:
        return JSONResponse([{"metadata": {"name": n}} for n in sorted(world.pull_secrets)])


@route("/imagepullsecrets", ["POST"])
async def create_pull_secret(request: Request, world: World) -> Response:
    body = await request.json()
    name = (body.get("metadata") or {}).get("name")
    spec = body.get("spec") or {}
    if not name or not spec.get("registry_server") or not spec.get("password"):
        return error(
            400,
            "InvalidRequest",
            "metadata.name, spec.registry_server and spec.password are required",
        )
    with world.lock:
        if name in world.pull_secrets:
            return error(409, "ResourceConflict", f"image pull secret {name} exists")
        world.pull_secrets[name] = dict(spec)
    return JSONResponse({"metadata": {"name": name}}, status_code=201)


@route("/imagepullsecrets/{name}", ["DELETE"])
async def delete_pull_secret(request: Request, world: World) -> Response:
    with world.lock:
        world.pull_secrets.pop(request.path_params["name"], None)
    return JSONResponse({})


@route("/workspace", ["GET"])
async def workspace(request: Request, world: World) -> Response:
    with world.lock:
        info = catalog.workspace_info(
            world.workspace, len(world.jobs), len(world.secrets), len(world.pull_secrets)
        )
    return JSONResponse(info)


@route("", ["GET"])
async def workspace_root(request: Request, world: World) -> Response:
    return JSONResponse({"display_name": world.workspace})


@route("/tokens", ["GET"])
async def tokens(request: Request, world: World) -> Response:
    return JSONResponse(
        [{"masked_value": "em...ul", "expires_at": int((time.time() + 86400) * 1000)}]
    )


# -- control (not part of the Lepton API) ------------------------------------------------


async def control_faults(request: Request) -> Response:
    """The faults of the workspace whose token the request carries."""
    world = _world_of(request, _bearer(request))
    if world is None:
        return error(401, "Unauthorized", "invalid or missing token")
    if request.method == "DELETE":
        world.faults.clear()
    elif request.method == "POST":
        body = await request.json()
        try:
            world.add_faults(
                [Fault.model_validate(f) for f in (body if isinstance(body, list) else [body])]
            )
        except ValidationError as exc:
            return error(400, "ValidationError", str(exc.errors(include_url=False)[0]["msg"]))
    return JSONResponse([f.model_dump(exclude_none=True) for f in world.faults.list()])


async def healthz(request: Request) -> Response:
    return PlainTextResponse("ok")


def build(worlds: dict[str, World]) -> Starlette:
    """The app serving `worlds` (workspace id -> World); the caller may add and remove
    workspaces while it serves."""
    routes = [r for r in globals().values() if isinstance(r, Route)]
    routes.sort(key=lambda r: r.path.count("{"))  # static segments before parameters
    routes += [
        Route("/_emulator/faults", control_faults, methods=["GET", "POST", "DELETE"]),
        Route("/_emulator/healthz", healthz, methods=["GET"]),
    ]
    app = Starlette(routes=routes)
    app.state.worlds = worlds
    return app
