"""A small REST client for the Lepton job API (no dependency on the `leptonai` SDK).

The SDK does not retry job calls and its requests have a 120 s timeout; a launcher that
submits hundreds of jobs needs more care: every call has a timeout, transient failures
(5xx, 429, dropped connections, truncated bodies) are retried with jittered backoff that
honours Retry-After, and 401/403 fail at once with what to do. A create whose response
was lost is never sent twice blindly: the job is first looked up by the name we sent.
"""

from __future__ import annotations

import functools
import os
import ssl
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_random_exponential,
)

from anylaunch.backends.lepton.rest import wire
from anylaunch.backends.lepton.rest.errors import (
    LeptonAuthError,
    LeptonCredentialsMissing,
    LeptonError,
    LeptonNotFound,
    LeptonUnavailable,
)

GATEWAY = "https://gateway.dgxc-lepton.nvidia.com"
RETRY_AFTER_CAP_S = 60.0
_M = TypeVar("_M", bound=BaseModel)


@dataclass(frozen=True)
class Credentials:
    """Where the workspace API is and the token for it. The token is never printed."""

    workspace_id: str
    token: str
    url: str

    def __repr__(self) -> str:
        return f"Credentials(workspace_id={self.workspace_id!r}, url={self.url!r}, token=***)"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Credentials:
        """LEPTON_WORKSPACE_ID + LEPTON_AUTH_TOKEN (the SDK's LEPTON_WORKSPACE_TOKEN also works);
        LEPTON_WORKSPACE_URL overrides the gateway URL (the emulator, another region)."""
        env = os.environ if environ is None else environ
        workspace = env.get("LEPTON_WORKSPACE_ID", "").strip()
        token = (env.get("LEPTON_AUTH_TOKEN") or env.get("LEPTON_WORKSPACE_TOKEN") or "").strip()
        if ":" in token and not workspace:  # the SDK's "<workspace>:<token>" credential form
            workspace, token = token.split(":", 1)
        missing = [
            n
            for n, v in (("LEPTON_WORKSPACE_ID", workspace), ("LEPTON_AUTH_TOKEN", token))
            if not v
        ]
        if missing:
            raise LeptonCredentialsMissing(
                f"{' and '.join(missing)} not set — export them (the workspace id and an API "
                "token from the Lepton dashboard, Settings → Tokens)"
            )
        url = env.get("LEPTON_WORKSPACE_URL", "").strip().rstrip("/")
        return cls(workspace, token, url or f"{GATEWAY}/api/v2/workspaces/{workspace}")


class _Retryable(Exception):
    """A response worth asking again for; carries Retry-After when the server sent one."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class LeptonClient:
    """One workspace's job API. Cheap to create; close it (or use `with`) when done."""

    def __init__(
        self,
        credentials: Credentials | None = None,
        *,
        timeout: float = 30.0,
        attempts: int = 8,
        max_elapsed_s: float = 120.0,
        backoff_s: float = 0.2,
        max_backoff_s: float = 8.0,
    ) -> None:
        self.credentials = credentials or Credentials.from_env()
        self.attempts = attempts
        self.max_elapsed_s = max_elapsed_s
        self._backoff = wait_random_exponential(multiplier=backoff_s, max=max_backoff_s)
        self._http = httpx.Client(
            base_url=self.credentials.url,
            headers={"Authorization": f"Bearer {self.credentials.token}"},
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            verify=_tls(),
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> LeptonClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- transport --------------------------------------------------------------------

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _Retryable) and exc.retry_after is not None:
            return min(exc.retry_after, RETRY_AFTER_CAP_S)
        return self._backoff(state)

    def _retrying(self) -> Retrying:
        return Retrying(
            stop=stop_after_attempt(self.attempts) | stop_after_delay(self.max_elapsed_s),
            wait=self._wait,
            retry=retry_if_exception_type((_Retryable, httpx.TransportError)),
            reraise=True,
        )

    def _once(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request, classified: a response to keep, retry, or raise on."""
        resp = self._http.request(method, path, **kwargs)
        self._once_check(resp)
        return resp

    def _call(self, method: str, path: str, *, parse: bool = True, **kwargs: Any) -> Any:
        """A request with retries; returns parsed JSON (or the response if `parse=False`)."""
        try:
            for attempt in self._retrying():
                with attempt:
                    resp = self._once(method, path, **kwargs)
                    return _json(resp) if parse else resp
        except _Retryable as exc:
            raise LeptonUnavailable(
                f"Lepton API {method} {path} kept failing ({exc}) after {self.attempts} tries"
                " — check the service status and retry later"
            ) from None
        except httpx.TransportError as exc:
            raise LeptonUnavailable(
                f"cannot reach the Lepton API at {self.credentials.url} ({type(exc).__name__})"
                " — check LEPTON_WORKSPACE_URL and the network"
            ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    # -- jobs -------------------------------------------------------------------------

    def create_job(self, body: dict[str, Any]) -> wire.LeptonJob:
        """POST /jobs, at most one job per name even when responses are lost.

        Before every retry we look the name up: a 502 or a dropped connection may come
        after the gateway already created the job.
        """
        name = body["metadata"]["id"]
        try:
            for attempt in self._retrying():
                with attempt:
                    if attempt.retry_state.attempt_number > 1:
                        found = self.find_job_by_name(name)
                        if found is not None:
                            return found
                    return wire.LeptonJob.model_validate(
                        _json(self._once("POST", "/jobs", json=body))
                    )
        except _Retryable as exc:
            raise LeptonUnavailable(
                f"Lepton did not accept job {name} ({exc}) after {self.attempts} tries"
            ) from None
        except httpx.TransportError as exc:
            raise LeptonUnavailable(
                f"cannot reach the Lepton API at {self.credentials.url} ({type(exc).__name__})"
            ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def get_job(self, job_id: str) -> wire.LeptonJob:
        data = self._call("GET", f"/jobs/{job_id}", params={"job_query_mode": "alive_and_archive"})
        return wire.LeptonJob.model_validate(data)

    def list_jobs(
        self,
        *,
        q: str | None = None,
        query: str | None = None,
        mode: str = "alive_and_archive",
        page_size: int = 500,
    ) -> Iterator[wire.LeptonJob]:
        """Every job, page by page (page 1, 2, ... until a short or empty page).

        500 a page, as the leptonai SDK asks. `q` is a substring of the name, `query` a
        label selector (`key in (a,b)`), the parameters the SDK's `list_all` and
        `list_matching` send.
        """
        seen: set[str] = set()
        page = 1
        while True:
            params: dict[str, Any] = {"job_query_mode": mode, "page": page, "page_size": page_size}
            if q:
                params["q"] = q
            if query:
                params["query"] = query
            data = self._call("GET", "/jobs", params=params)
            items = data.get("jobs", []) if isinstance(data, dict) else data
            jobs = _valid(wire.LeptonJob, items)
            new = [j for j in jobs if j.metadata.id not in seen]
            yield from new
            seen.update(j.metadata.id or "" for j in new)
            if len(items) < page_size or not new:  # a server that ignores `page` must not loop
                return
            page += 1

    def find_job_by_name(self, name: str) -> wire.LeptonJob | None:
        """The newest job whose metadata.name is `name` (names need not be unique there)."""
        matches = [j for j in self.list_jobs(q=name) if j.metadata.name == name]
        return max(matches, key=lambda j: j.metadata.created_at or 0) if matches else None

    def stop_job(self, job_id: str) -> None:
        self._call("PATCH", f"/jobs/{job_id}", json={"spec": {"stopped": True}}, parse=False)

    def delete_job(self, job_id: str) -> None:
        self._call(
            "DELETE", f"/jobs/{job_id}", params={"job_query_mode": "alive_only"}, parse=False
        )

    def replicas(self, job_id: str) -> list[wire.Replica]:
        data = self._call(
            "GET", f"/jobs/{job_id}/replicas", params={"job_query_mode": "alive_and_archive"}
        )
        return _valid(wire.Replica, data)

    def events(self, job_id: str) -> list[wire.Event]:
        return _valid(wire.Event, self._call("GET", f"/jobs/{job_id}/events"))

    def logs(
        self,
        job_id: str,
        *,
        replica: str | None = None,
        start_ns: int,
        end_ns: int,
        limit: int = 10000,
        direction: str = "forward",
    ) -> list[tuple[int, dict[str, Any], str]]:
        """Collected log lines from `/logs` (Loki shape): (ns timestamp, stream labels, line)."""
        params: dict[str, Any] = {
            "start": start_ns,
            "end": end_ns,
            "timestamps": "True",
            "direction": direction,
            "limit": limit,
            "q": "",
            "job_query_mode": "alive_and_archive",
            "job": job_id,
        }
        if replica:
            params["replica"] = replica
        data = self._call("GET", "/logs", params=params)
        out = []
        for stream in (data.get("data") or {}).get("result") or []:
            labels = stream.get("stream") or {}
            for value in stream.get("values") or []:
                out.append((int(value[0]), labels, str(value[1])))
        out.sort(key=lambda v: v[0], reverse=direction == "backward")
        return out

    def job_log_lines(
        self, job_id: str, since: float, *, limit: int = 10000
    ) -> list[tuple[int, dict[str, Any], str]]:
        """Every collected line of a job since `since` (epoch s), oldest first, page by page."""
        start = int((since - 120) * 1e9)
        end = time.time_ns() + 60 * 10**9
        out: list[tuple[int, dict[str, Any], str]] = []
        while True:
            page = self.logs(job_id, start_ns=start, end_ns=end, limit=limit, direction="forward")
            out += page
            if len(page) < limit:
                return out
            start = page[-1][0] + 1

    def stream_replica_log(
        self, job_id: str, replica_id: str, *, read_timeout: float = 60.0
    ) -> Iterator[str]:
        """One connection to a replica's live log: text until the server closes it.

        The connection may drop mid-run (the SDK warns it does); `sdk.follow_replica_log`
        reconnects and skips what was already read.
        """
        path = f"/jobs/{job_id}/replicas/{replica_id}/log"
        timeout = httpx.Timeout(read_timeout, connect=10.0)
        for attempt in self._retrying():
            with attempt:
                request = self._http.build_request("GET", path, timeout=timeout)
                resp = self._http.send(request, stream=True)
                if resp.status_code >= 400:
                    resp.read()
                    resp.close()
                    self._once_check(resp)
        try:
            yield from resp.iter_text()
        finally:
            resp.close()

    def _once_check(self, resp: httpx.Response) -> None:
        """Raise for an error response the way `_once` does."""
        code = resp.status_code
        where = f"{resp.request.method} {resp.request.url.path}"
        if code in (401, 403):
            raise LeptonAuthError(_auth_message(code, self.credentials), status=code)
        if code == 429 or code >= 500:
            raise _Retryable(f"{code} {_brief(resp)}", _retry_after(resp))
        if code == 404:
            raise LeptonNotFound(f"Lepton: {where}: not found ({_brief(resp)})", status=404)
        if code >= 400:
            raise LeptonError(f"Lepton refused {where}: {code} {_brief(resp)}", status=code)

    # -- workspace resources ----------------------------------------------------------

    def node_groups(self) -> list[wire.NodeGroup]:
        return _valid(wire.NodeGroup, self._call("GET", "/dedicated-node-groups"))

    def node_group(self, node_group_id: str) -> wire.NodeGroup:
        data = self._call("GET", f"/dedicated-node-groups/{node_group_id}")
        return wire.NodeGroup.model_validate(data)

    def nodes(self, node_group_id: str) -> list[wire.Node]:
        return _valid(wire.Node, self._call("GET", f"/dedicated-node-groups/{node_group_id}/nodes"))

    def shapes(self, node_group_id: str | None = None, purpose: str = "job") -> list[wire.Shape]:
        params = {"purpose": purpose}
        if node_group_id:
            params["node_groups"] = node_group_id
        return _valid(wire.Shape, self._call("GET", "/shapes", params=params))

    def storage_permissions(
        self, volume: str, node_group_id: str | None = None
    ) -> list[wire.StoragePermission]:
        params = {"nodegroup_id": node_group_id} if node_group_id else {}
        data = self._call("GET", f"/storage-permission/{volume}", params=params)
        return _valid(wire.StoragePermission, data)

    def secret_names(self) -> set[str]:
        data = self._call("GET", "/usersecrets")
        return {item["name"] if isinstance(item, dict) else str(item) for item in data or []}

    def put_secrets(self, values: Mapping[str, str]) -> None:
        """Create or update workspace secrets (POST is idempotent for a name: safe to retry)."""
        if values:
            body = [{"name": k, "value": v} for k, v in values.items()]
            self._call("POST", "/usersecrets", json=body, parse=False)

    def delete_secret(self, name: str) -> None:
        """Delete a workspace secret; one that is gone already is not an error."""
        try:
            self._call("DELETE", f"/usersecrets/{name}", parse=False)
        except LeptonNotFound:
            return

    def image_pull_secret_names(self) -> set[str]:
        data = self._call("GET", "/imagepullsecrets")
        return {(item.get("metadata") or {}).get("name", "") for item in data or []}

    def create_image_pull_secret(
        self, name: str, *, registry: str, username: str, password: str, email: str = ""
    ) -> None:
        body = {
            "metadata": {"name": name},
            "spec": {
                "registry_server": registry,
                "username": username,
                "password": password,
                "email": email,
            },
        }
        try:
            self._call("POST", "/imagepullsecrets", json=body, parse=False)
        except LeptonError as exc:
            if exc.status != 409:  # 409: it exists, which is what we wanted
                raise

    def workspace(self) -> dict[str, Any]:
        return self._call("GET", "/workspace")


@functools.lru_cache(maxsize=1)
def _tls() -> ssl.SSLContext:
    """One TLS context for every client of this process. httpx builds a new one per client
    by loading the whole CA bundle (~0.15 s of CPU, under the GIL), and a client is made
    per operation: 100 splits paid 30 s of it. httpx's defaults (certifi, SSL_CERT_FILE)."""
    return httpx.create_ssl_context()


def _valid(model: type[_M], items: Any) -> list[_M]:
    """List items that fit the model; the SDK skips invalid ones, and so do we."""
    out = []
    for item in items or []:
        try:
            out.append(model.model_validate(item))
        except ValidationError:
            continue
    return out


def _json(resp: httpx.Response) -> Any:
    if not resp.content:
        return {}
    try:
        return resp.json()
    except ValueError:
        # A 2xx whose body is cut short is a transport fault, not an answer.
        raise _Retryable(f"{resp.status_code} with a body that is not JSON") from None


def _retry_after(resp: httpx.Response) -> float | None:
    value = resp.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _brief(resp: httpx.Response) -> str:
    """The error body's message, one line, short."""
    try:
        data = resp.json()
        text = data.get("message") or data.get("code") or resp.text
    except (ValueError, AttributeError):
        text = resp.text
    return " ".join(str(text).split())[:200]


def _auth_message(code: int, creds: Credentials) -> str:
    what = "rejected the token" if code == 401 else "refused access to workspace"
    return (
        f"Lepton {what} ({code}) for workspace {creds.workspace_id} — token invalid or "
        "expired: create a new one in the Lepton dashboard (Settings → Tokens), export "
        "LEPTON_AUTH_TOKEN, and check LEPTON_WORKSPACE_ID"
    )
