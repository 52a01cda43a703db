"""Who may use the dashboard: the access token, the Host check, and the action token.

- Bound to another address than loopback (an explicit `--host`), every request needs the
  random access token printed at start: `?token=` once, then a cookie (HttpOnly,
  SameSite=Strict), or `Authorization: Bearer`.
- On loopback, the Host header must name this server, so a web page that re-points its
  own DNS name at 127.0.0.1 (DNS rebinding) cannot read the dashboard.
- Actions (POST: cancel, retry) also need the page's action token in a header. Another
  site can make a browser send a form to localhost, but it cannot read our page to learn
  the token, nor set a custom header without a CORS preflight we never answer.
"""

from __future__ import annotations

import secrets
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, urlencode

from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE = "anylaunch_ui"
ACTION_HEADER = "x-anylaunch-action"
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
# Scripts and styles only from our own files: text that slipped through could not run.
CSP = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'"
HEADERS = [
    (b"content-security-policy", f"{CSP}; form-action 'self'".encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),  # the token may be in the first URL
]
# Pages are live: never cached. Static files are named by their content's hash (`?v=`),
# so the browser keeps them and a page load costs one request.
NO_STORE = (b"cache-control", b"no-store")
IMMUTABLE = (b"cache-control", b"public, max-age=31536000, immutable")


def _same(given: str, expected: str) -> bool:
    """Constant-time comparison that also takes the odd bytes a header may carry."""
    return secrets.compare_digest(given.encode("utf-8", "surrogateescape"), expected.encode())


def needs_token(host: str) -> bool:
    return host not in LOOPBACK


class Guard:
    """ASGI middleware in front of every route, streaming ones included."""

    def __init__(
        self, app: ASGIApp, *, host: str, port: int, token: str | None, action_token: str
    ) -> None:
        self.app = app
        self.token = token
        self.action_token = action_token
        names = {host, "127.0.0.1", "localhost", "[::1]"} if token is None else set()
        self.hosts = {f"{n}:{port}" for n in names}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await refusal(scope, receive, send)
            return

        static = scope["path"].startswith("/static/") and b"v=" in scope["query_string"]
        extra = [*HEADERS, IMMUTABLE if static else NO_STORE]

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> Response | None:
        if self.hosts and headers.get("host", "") not in self.hosts:
            return PlainTextResponse("unknown Host header", status_code=421)
        if self.token is not None:
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            given = query.get("token", [None])[0]
            if given is not None and _same(given, self.token):
                # Trade the URL's token for a cookie, and drop it from the address bar.
                rest = {k: v[0] for k, v in query.items() if k != "token"}
                target = scope["path"] + ("?" + urlencode(rest) if rest else "")
                response = RedirectResponse(target, status_code=303)
                response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict")
                return response
            if not self._has_token(headers):
                return PlainTextResponse(
                    "open the address with the token that `anylaunch ui` printed", status_code=401
                )
        if scope["method"] not in ("GET", "HEAD"):
            given = headers.get(ACTION_HEADER, "")
            if not _same(given, self.action_token):
                return PlainTextResponse("missing action token", status_code=403)
        return None

    def _has_token(self, headers: dict[str, str]) -> bool:
        assert self.token is not None
        bearer = headers.get("authorization", "")
        if bearer.startswith("Bearer ") and _same(bearer[7:], self.token):
            return True
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:
            return False
        morsel = cookie.get(COOKIE)
        return morsel is not None and _same(morsel.value, self.token)
