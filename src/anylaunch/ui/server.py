"""Start the dashboard: bind the socket, print the address, serve until interrupted.

The socket is bound here, before uvicorn starts, so `--port 0` can print the port it got
and a test can read it; and so the Host check knows the real port.
"""

from __future__ import annotations

import secrets
import socket
import sys
from pathlib import Path

import uvicorn

from anylaunch.store import Store, home
from anylaunch.ui.app import create_app
from anylaunch.ui.guard import Guard, needs_token


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def serve(host: str = "127.0.0.1", port: int = 8471, root: Path | None = None) -> None:
    """Serve the store at `root` (default `$ANYLAUNCH_HOME`) on host:port until Ctrl-C."""
    root = root or home()
    Store(root).close()  # create the store now: a first page must not race a first job
    sock = bind(host, port)
    port = sock.getsockname()[1]
    token = secrets.token_urlsafe(24) if needs_token(host) else None
    action_token = secrets.token_urlsafe(24)
    app = Guard(
        create_app(root, action_token), host=host, port=port, token=token, action_token=action_token
    )
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
    print(f"anylaunch ui: {url}", flush=True)
    if token:
        print("anylaunch ui: not loopback — share the token only with whom may cancel jobs",
              file=sys.stderr, flush=True)  # fmt: skip
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=2,  # open log streams would otherwise hold the exit
        lifespan="off",
    )
    uvicorn.Server(config).run(sockets=[sock])
