"""The dashboard's routes: pages, fragments for live refresh, the log stream, actions.

Handlers are thin: data comes from `lists` and `detail` (the CLI's API underneath),
markup from the templates, and every page passes the Masker last. Sync handlers run in
Starlette's thread pool, so each opens its own Store (SQLite connections belong to the
thread that made them) and closes it when done.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from anylaunch.backends.registry import names as backend_names
from anylaunch.cli.tables import age
from anylaunch.errors import AnylaunchError, JobNotFound
from anylaunch.launch import retry
from anylaunch.observe import runs, source, watch
from anylaunch.observe.reports import open_report, profile_reports
from anylaunch.state import State
from anylaunch.store import Store
from anylaunch.ui import detail, lists, live, plots
from anylaunch.ui.masking import Masker
from anylaunch.workflow import controller, engine
from anylaunch.workflow import record as wfrecord

REFRESH_MS = 2000
WORKFLOWS_SHOWN = 20  # the newest, on the front page


class Dashboard:
    """One server's state: where the store is, the Masker, the templates, the action token."""

    def __init__(self, root: Path, action_token: str, masker: Masker | None = None) -> None:
        self.root = root
        self.masker = masker or Masker()
        self.action_token = action_token
        self.templates = Environment(
            loader=PackageLoader("anylaunch.ui", "templates"),
            autoescape=select_autoescape(default=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        version = _assets_version()
        self.templates.globals.update(
            asset=lambda name: f"/static/{name}?v={version}",
            action_token=action_token,
            states=[s.value for s in State],
            backends=backend_names(),
            refresh_ms=REFRESH_MS,
            when=lambda at: time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at)),
            ago=lambda at: age(time.time() - at),
            span=plots.span,
            source_line=source.line,
        )

    @contextmanager
    def store(self) -> Iterator[Store]:
        store = Store(self.root)
        try:
            yield store
        finally:
            store.close()

    def render(
        self, name: str, secret_names: Mapping[str, str | None] | None = None, **context: Any
    ) -> str:
        """The template's HTML with every known secret value masked: the last gate."""
        html = self.templates.get_template(name).render(**context)
        return self.masker.text(html, secret_names or ())

    # -- pages ----------------------------------------------------------------------------

    def index(self, request: Request) -> HTMLResponse:
        filters = _filters(request)
        with self.store() as store:
            page = lists.front_page(store, filters)
            workflows = store.workflows(limit=WORKFLOWS_SHOWN)
        return HTMLResponse(
            self.render("index.html", filters=filters, page=page, workflows=workflows)
        )

    def lists_fragment(self, request: Request) -> HTMLResponse:
        filters = _filters(request)
        with self.store() as store:
            page = lists.front_page(store, filters)
        return HTMLResponse(self.render("_lists.html", filters=filters, page=page))

    def job(self, request: Request) -> HTMLResponse:
        with self.store() as store:
            page = detail.job_page(store, request.path_params["job_id"], self.masker)
        return HTMLResponse(self.render("job.html", page.secret_names, job=page.record, page=page))

    def curve(self, request: Request) -> HTMLResponse:
        with self.store() as store:
            svg = detail.curve(store, request.path_params["job_id"])
        return HTMLResponse(self.masker.text(svg))

    def report(self, request: Request) -> Response:
        with self.store() as store:
            record = store.get(request.path_params["job_id"])
        reports = profile_reports(record)
        index = request.path_params["index"]
        if index >= len(reports):
            raise JobNotFound(f"no report {index} for this job")
        # Only a path the job's plan names (the index never lets a request pick a file),
        # opened without following links: the job could have swapped one in since.
        try:
            fd = open_report(record, reports[index])
        except OSError as exc:
            raise JobNotFound(f"report {index} cannot be served: {exc}") from None
        handle = os.fdopen(fd, "rb")
        size = os.fstat(fd).st_size
        return StreamingResponse(
            _chunks(handle),
            media_type="application/octet-stream",
            headers={
                "content-length": str(size),
                # The job named the file: quoted, so no name can add a header.
                "content-disposition": f"attachment; filename*=utf-8''{quote(Path(reports[index]).name)}",
            },
        )

    def run(self, request: Request) -> HTMLResponse:
        with self.store() as store:
            page = detail.run_page(store, request.path_params["run_id"], self.masker)
        return HTMLResponse(self.render("run.html", page=page, view=page.view))

    def workflow(self, request: Request) -> HTMLResponse:
        """A workflow as its graph, each step linking to its jobs; an unfinished one whose
        controller died gets a new one, as `anylaunch status WF` does."""
        with self.store() as store:
            wf = engine.view(request.path_params["workflow_id"], store)
            controller.ensure(wf.id, store, wf.state)
        return HTMLResponse(
            self.render(
                "workflow.html",
                wf=wf,
                levels=wf.record.doc["levels"],
                mode=wf.record.doc.get("mode", wfrecord.CONTROLLED),
                ended=engine.ENDED,
            )
        )

    async def logs(self, request: Request) -> StreamingResponse:
        job_id = request.path_params["job_id"]
        with self.store() as store:
            job_id = store.get(job_id).id  # 404 now, not inside the stream
        events = live.stream(self.root, job_id, self.masker, request.headers.get("last-event-id"))
        return StreamingResponse(
            events, media_type="text/event-stream", headers={"x-accel-buffering": "no"}
        )

    # -- actions: the CLI's code paths ----------------------------------------------------

    def cancel(self, request: Request) -> JSONResponse:
        """`anylaunch cancel JOB`: record the intent, stop it on its backend, wait."""
        with self.store() as store:
            job = watch.get(request.path_params["job_id"], store=store)
            state = job.cancel()
        return JSONResponse({"id": job.id, "state": state.value})

    def retry(self, request: Request) -> JSONResponse:
        """`anylaunch retry RUN --failed`: submit what a crash left unsent, then resubmit
        the failed splits under their split ids."""
        with self.store() as store:
            view = runs.load(request.path_params["run_id"], store)
            resumed = retry.resume_unsent(view, store)
            if resumed:
                view = runs.load(view.id, store)
            retried = retry.retry_failed(view, store)
        return JSONResponse({"run": view.id, "retried": retried, "resumed": resumed})

    # -- errors ---------------------------------------------------------------------------

    async def error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, AnylaunchError)
        status = 404 if isinstance(exc, JobNotFound) else 400
        message = self.masker.text(exc.message)
        if request.method != "GET":
            return JSONResponse({"error": {"code": exc.code, "message": message}}, status)
        return HTMLResponse(self.render("error.html", message=message), status)


def _chunks(handle: BinaryIO, size: int = 1 << 20) -> Iterator[bytes]:
    with handle:
        while chunk := handle.read(size):
            yield chunk


def _assets_version() -> str:
    """A hash of the static files: their URLs change when they do, so they can be cached."""
    digest = hashlib.sha256()
    for name in sorted(resources.files("anylaunch.ui").joinpath("static").iterdir(), key=str):
        digest.update(name.read_bytes())
    return digest.hexdigest()[:12]


def _filters(request: Request) -> lists.Filters:
    query = request.query_params
    backend = query.get("backend") or None
    state = query.get("state") or None
    page = query.get("page", "0")
    return lists.Filters(
        backend=backend if backend in backend_names() else None,
        state=State(state) if state in State.__members__ else None,
        page=int(page) if page.isdigit() else 0,
    )


def create_app(root: Path, action_token: str, masker: Masker | None = None) -> Starlette:
    board = Dashboard(root, action_token, masker)
    routes = [
        Route("/", board.index),
        Route("/fragments/lists", board.lists_fragment),
        Route("/jobs/{job_id}", board.job),
        Route("/jobs/{job_id}/curve", board.curve),
        Route("/jobs/{job_id}/logs", board.logs),
        Route("/jobs/{job_id}/reports/{index:int}", board.report),
        Route("/jobs/{job_id}/cancel", board.cancel, methods=["POST"]),
        Route("/runs/{run_id}", board.run),
        Route("/workflows/{workflow_id}", board.workflow),
        Route("/runs/{run_id}/retry", board.retry, methods=["POST"]),
        Mount("/static", StaticFiles(packages=[("anylaunch.ui", "static")]), name="static"),
    ]
    return Starlette(routes=routes, exception_handlers={AnylaunchError: board.error})
