"""A webhook receiver on loopback: real HTTP, refusing the first `refuse` POSTs."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Receiver:
    def __init__(self, refuse: int = 0) -> None:
        self.refuse = refuse
        self.tries: list[dict] = []  # every POST: its status, headers and body
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with outer.lock:
                    status = 503 if len(outer.tries) < outer.refuse else 200
                    outer.tries.append(
                        {"status": status, "headers": dict(self.headers), "body": body.decode()}
                    )
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b"ok" if status == 200 else b"no")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def accepted(self) -> list[dict]:
        with self.lock:
            return [json.loads(t["body"]) for t in self.tries if t["status"] == 200]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
