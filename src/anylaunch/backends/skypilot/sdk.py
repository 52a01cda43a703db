"""The few SkyPilot SDK calls the backend makes, in one place.

SkyPilot's client talks to its API server: every call returns a request id at once and
`sky.get` waits for the result. Batching therefore means sending every request first
and waiting afterwards, which `poll` relies on.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

from anylaunch.backends.skypilot.validate import sky
from anylaunch.errors import BackendError, SubmitOutcomeUnknown

P = ParamSpec("P")
R = TypeVar("R")


def _stdout_to_stderr(func: Callable[P, R]) -> Callable[P, R]:
    """SkyPilot's client prints progress (`Running on cluster: ...`) on stdout, which
    belongs to anylaunch's own output (`--json`)."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with contextlib.redirect_stdout(sys.stderr):
            return func(*args, **kwargs)

    return wrapper


@_stdout_to_stderr
def task(task_config: Mapping[str, Any], secrets: Mapping[str, str]) -> Any:
    """The sky.Task for a rendered task, with secret values filled in only now."""
    return sky().Task.from_yaml_config(
        copy.deepcopy(dict(task_config)), secrets_overrides=sorted(secrets.items()) or None
    )


# The API server's names for the requests that start a job.
LAUNCHES = ("sky.launch", "sky.jobs.launch")


def _answer_may_be_lost(func: Callable[P, R]) -> Callable[P, R]:
    """A launch whose connection broke after it was sent may have been queued by the API
    server: that is an unknown outcome, looked up later (`launch_requests`). A connection
    that was never made sent nothing, and stays an ordinary failure."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        import requests

        try:
            return func(*args, **kwargs)
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as exc:
            if _never_connected(exc):
                raise BackendError(f"SkyPilot API server unreachable: {exc}") from None
            raise SubmitOutcomeUnknown(f"SkyPilot API server: {exc}") from None

    return wrapper


def _never_connected(exc: Exception) -> bool:
    import requests
    import urllib3

    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return True
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    return isinstance(reason, urllib3.exceptions.NewConnectionError)


@_stdout_to_stderr
@_answer_may_be_lost
def launch(task_obj: Any, cluster_name: str) -> str:
    """Start `sky launch` on the API server; returns the request id (provisioning runs on)."""
    # Autostop/autodown travel in the task's resources (resources.autostop).
    return str(sky().launch(task_obj, cluster_name=cluster_name))


@_stdout_to_stderr
@_answer_may_be_lost
def jobs_launch(task_obj: Any, name: str) -> str:
    """Start `sky jobs launch` (a managed job); returns the request id."""
    return str(sky().jobs.launch(task_obj, name=name))


@_stdout_to_stderr
def launch_requests() -> list[tuple[str, str]]:
    """Every launch request the API server remembers, finished ones too, oldest first:
    (request id, request body). One call."""
    try:
        rows = sky().api_status(all_status=True)
    except Exception as exc:  # the server did not answer: nothing can be concluded
        raise BackendError(f"SkyPilot API server: {exc}") from None
    rows = sorted((r for r in rows if r.name in LAUNCHES), key=lambda r: r.created_at)
    return [(row.request_id, row.request_body) for row in rows]


@_stdout_to_stderr
def request_statuses(request_ids: Sequence[str]) -> dict[str, str]:
    """One call: the status of each launch request (PENDING ... SUCCEEDED/FAILED)."""
    if not request_ids:
        return {}
    rows = sky().api_status(list(request_ids))
    return {row.request_id: str(getattr(row.status, "value", row.status)) for row in rows}


@_stdout_to_stderr
def request_result(request_id: str) -> Any:
    """The finished request's value; raises the request's own exception if it failed."""
    return sky().get(request_id)


@_stdout_to_stderr
def cluster_statuses(names: Sequence[str]) -> dict[str, str]:
    """One call for every cluster: INIT / UP / STOPPED; a missing name is gone."""
    if not names:
        return {}
    module = sky()
    rows = module.get(module.status(cluster_names=list(names)))
    return {row["name"]: str(getattr(row["status"], "value", row["status"])) for row in rows}


@_stdout_to_stderr
def cluster_job_statuses(jobs: Mapping[str, Sequence[int]]) -> dict[tuple[str, int], str | None]:
    """Job statuses on many clusters: every request is sent before any is awaited."""
    module = sky()
    pending = {name: module.job_status(name, list(ids)) for name, ids in jobs.items()}
    out: dict[tuple[str, int], str | None] = {}
    for name, request in pending.items():
        try:
            found = module.get(request)
        except Exception:  # the cluster went away between the two calls
            found = {}
        for job_id in jobs[name]:
            status = found.get(job_id)
            out[(name, job_id)] = None if status is None else str(getattr(status, "value", status))
    return out


@_stdout_to_stderr
def managed_jobs(job_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """One call for every managed job: status, recovery_count, failure_reason."""
    if not job_ids:
        return {}
    module = sky()
    result = module.get(module.jobs.queue_v2(refresh=False, job_ids=list(job_ids)))
    rows = result[0] if isinstance(result, tuple) else result
    out: dict[int, dict[str, Any]] = {}
    for row in rows:
        record = row if isinstance(row, dict) else row.model_dump()
        status = record.get("status")
        record["status"] = str(getattr(status, "value", status))
        out[int(record["job_id"])] = record
    return out


@_stdout_to_stderr
def cluster_logs(cluster_name: str, job_id: int) -> str:
    out = io.StringIO()
    sky().tail_logs(cluster_name, job_id, follow=False, output_stream=out)
    return out.getvalue()


@_stdout_to_stderr
def managed_logs(job_id: int) -> str:
    out = io.StringIO()
    sky().jobs.tail_logs(job_id=job_id, follow=False, output_stream=out)
    return out.getvalue()


@_stdout_to_stderr
def cancel_cluster_job(cluster_name: str, job_id: int) -> None:
    module = sky()
    module.get(module.cancel(cluster_name, job_ids=[job_id]))


@_stdout_to_stderr
def cancel_managed(job_id: int) -> None:
    module = sky()
    module.get(module.jobs.cancel(job_ids=[job_id]))


@_stdout_to_stderr
def cancel_request(request_id: str) -> None:
    sky().api_cancel(request_id)


@_stdout_to_stderr
def down(cluster_name: str) -> None:
    module = sky()
    module.get(module.down(cluster_name))
