"""An S3 endpoint on 127.0.0.1 that lists and heads honestly but answers GETs wrongly.

Real HTTP over a real socket: the runtime's client talks to it exactly as to S3. Only
what stage-in uses is served: HEAD and GET of an object, and ListObjectsV2.
"""

from __future__ import annotations

import hashlib
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape

# How a GET of an object is answered:
MODES = {
    "whole-body": "200 and the whole object, whatever the Range asked",
    "first-bytes": "206 and the first bytes of the object, labelled as such",
    "no-content-range": "206 and the first bytes of the object, unlabelled",
    "other-version": "another version of the same size, If-Match ignored",
    "longer-body": "206 with the right label and a body longer than the range",
}
# And a listing that is not what was asked for:
LIST_EVERYTHING = "list-everything"  # every key of the bucket, whatever the prefix


def etag(body: bytes) -> str:
    return '"' + hashlib.md5(body).hexdigest() + '"'


class Hostile(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, bucket: str, objects: dict[str, bytes], mode: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.bucket, self.objects, self.mode = bucket, objects, mode
        self.gets: list[str] = []  # the Range of every object GET, in order

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that hung up
            super().handle_error(request, client_address)  # type: ignore[arg-type]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as S3
    server: Hostile

    def log_message(self, *_: object) -> None:
        pass

    def _key(self) -> str | None:
        path = unquote(urlsplit(self.path).path)
        bucket, _, key = path.lstrip("/").partition("/")
        return key if bucket == self.server.bucket else None

    def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        if "Connection" not in headers:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        if headers.get("Connection") == "close":
            self.close_connection = True

    def do_HEAD(self) -> None:
        body = self.server.objects.get(self._key() or "")
        if body is None:
            self._send(404, b"", {})
            return
        self._send(200, body, {"ETag": etag(body)})

    def do_GET(self) -> None:
        key = self._key()
        query = parse_qs(urlsplit(self.path).query)
        if key == "" and query.get("list-type") == ["2"]:
            self._list(query.get("prefix", [""])[0])
            return
        body = self.server.objects.get(key or "")
        if body is None:
            self._send(404, b"<Error><Code>NoSuchKey</Code></Error>", {})
            return
        asked = self.headers.get("Range", "")
        self.server.gets.append(asked)
        match = re.match(r"bytes=(\d+)-(\d+)", asked)
        start, end = (int(match[1]), int(match[2])) if match else (0, len(body) - 1)
        size, length = len(body), end - start + 1
        mode = self.server.mode
        if mode == "whole-body":
            self._send(200, body, {"ETag": etag(body)})
        elif mode == "first-bytes":
            label = f"bytes 0-{length - 1}/{size}"
            self._send(206, body[:length], {"ETag": etag(body), "Content-Range": label})
        elif mode == "no-content-range":
            self._send(206, body[:length], {"ETag": etag(body)})
        elif mode == "other-version":
            other = bytes(b ^ 0xFF for b in body)
            label = f"bytes {start}-{end}/{size}"
            self._send(206, other[start : end + 1], {"ETag": etag(other), "Content-Range": label})
        elif mode == "longer-body":
            label = f"bytes {start}-{end}/{size}"
            extra = body[start : end + 1] + b"x" * 1000
            self._send(
                206, extra, {"ETag": etag(body), "Content-Range": label, "Connection": "close"}
            )
        else:  # an honest answer
            label = f"bytes {start}-{end}/{size}"
            self._send(206, body[start : end + 1], {"ETag": etag(body), "Content-Range": label})

    def _list(self, prefix: str) -> None:
        rows = "".join(
            f"<Contents><Key>{escape(k)}</Key><ETag>{escape(etag(b))}</ETag>"
            f"<Size>{len(b)}</Size></Contents>"
            for k, b in sorted(self.server.objects.items())
            if k.startswith(prefix) or self.server.mode == LIST_EVERYTHING
        )
        xml = (
            '<?xml version="1.0" encoding="UTF-8"?>'
            '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
            f"<Name>{self.server.bucket}</Name><Prefix>{escape(prefix)}</Prefix>"
            f"<IsTruncated>false</IsTruncated>{rows}</ListBucketResult>"
        )
        self._send(200, xml.encode(), {"Content-Type": "application/xml"})


@contextmanager
def hostile(bucket: str, objects: dict[str, bytes], mode: str) -> Iterator[Hostile]:
    server = Hostile(bucket, objects, mode)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
