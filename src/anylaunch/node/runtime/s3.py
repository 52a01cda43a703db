"""The S3 client of the in-job runtime: SigV4-signed requests over http.client.

Standard library only (python3 >= 3.8). One connection per thread and host; requests
are retried on network errors, 5xx and throttling. A ranged GET is pinned with If-Match
to the ETag that was listed, and its answer is checked before a byte is kept: a server
that ignores Range or If-Match must not turn into a file of the wrong size or version.
The submit side uses this same client (`anylaunch.storage.s3`).
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import http.client
import os
import random
import re
import threading
import time
import urllib.parse
import xml.etree.ElementTree as ET

TYPE_CHECKING = False  # typing's own flag, without importing typing at start
if TYPE_CHECKING:
    from typing import Any, Callable, Iterator

MiB = 1024 * 1024
_EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"  # of b""
_CONTENT_RANGE = re.compile(r"^bytes\s+(\d+)-(\d+)/(\d+)$")


# -- settings -----------------------------------------------------------------------------


def env_int(name: str, default: int, environ: dict[str, str] | None = None) -> int:
    env = os.environ if environ is None else environ
    try:
        return max(int(env.get(name, default)), 1)
    except ValueError:
        return default


def concurrency() -> int:
    """Parallel streams (ANYLAUNCH_STAGE_CONCURRENCY, 16 by default)."""
    return env_int("ANYLAUNCH_STAGE_CONCURRENCY", 16)


def part_size() -> int:
    """Range and part size (ANYLAUNCH_STAGE_PART_MB, 8 MiB; S3 parts are at least 5 MiB)."""
    return max(env_int("ANYLAUNCH_STAGE_PART_MB", 8), 5) * MiB


# -- errors and credentials ---------------------------------------------------------------


class S3Error(Exception):
    """An S3 error response (code such as NoSuchKey, AccessDenied, 404), a network
    failure (NetworkError), or an answer that is not what was asked for."""

    def __init__(self, code: str, status: int = 0, message: str = "") -> None:
        super().__init__(f"{code}: {message}" if message else code)
        self.code, self.status, self.message = code, status, message


def error_code(exc: BaseException) -> str:
    return exc.code if isinstance(exc, S3Error) else type(exc).__name__


class Credentials:
    """TAO's variables (S3_ENDPOINT_URL, ACCESS_KEY, SECRET_KEY, CLOUD_REGION), else
    AWS's standard variables, else the shared credentials file (~/.aws/credentials)."""

    def __init__(
        self,
        access_key: str,
        secret_key: str,
        token: str,
        region: str,
        endpoint: str,
    ) -> None:
        self.access_key, self.secret_key, self.token = access_key, secret_key, token
        self.region, self.endpoint = region, endpoint

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Credentials:
        env = dict(os.environ if environ is None else environ)
        access = env.get("ACCESS_KEY") or env.get("AWS_ACCESS_KEY_ID") or ""
        secret = env.get("SECRET_KEY") or env.get("AWS_SECRET_ACCESS_KEY") or ""
        token = "" if env.get("ACCESS_KEY") else env.get("AWS_SESSION_TOKEN", "")
        region = env.get("CLOUD_REGION") or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
        if not (access and secret):
            access, secret, token, region = _shared_file(env, region)
        endpoint = env.get("S3_ENDPOINT_URL") or env.get("AWS_ENDPOINT_URL_S3") or ""
        endpoint = endpoint or env.get("AWS_ENDPOINT_URL") or ""
        return cls(access, secret, token, region or "us-east-1", endpoint.rstrip("/"))

    @property
    def present(self) -> bool:
        return bool(self.access_key and self.secret_key)


def _shared_file(env: dict[str, str], region: str | None) -> tuple[str, str, str, str | None]:
    import configparser  # only without credentials in the environment

    profile = env.get("AWS_PROFILE") or "default"
    home = os.path.expanduser("~")
    creds = configparser.ConfigParser()
    creds.read(env.get("AWS_SHARED_CREDENTIALS_FILE") or os.path.join(home, ".aws", "credentials"))
    config = configparser.ConfigParser()
    config.read(env.get("AWS_CONFIG_FILE") or os.path.join(home, ".aws", "config"))
    section: Any = creds[profile] if creds.has_section(profile) else {}
    conf_name = profile if profile == "default" else "profile " + profile
    conf: Any = config[conf_name] if config.has_section(conf_name) else {}
    return (
        section.get("aws_access_key_id", ""),
        section.get("aws_secret_access_key", ""),
        section.get("aws_session_token", ""),
        region or conf.get("region"),
    )


# -- the wire -----------------------------------------------------------------------------


def _quote(text: str, safe: str = "/") -> str:
    return urllib.parse.quote(text, safe=safe + "~")


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def _strip(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _xml(body: bytes) -> ET.Element:
    root = ET.fromstring(body)
    for element in root.iter():
        element.tag = _strip(element.tag)
    return root


def _escape(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


def same_etag(ours: str, theirs: str) -> bool:
    """One ETag, however it is quoted (a listing may leave out the quotes a header has)."""

    def bare(tag: str) -> str:
        tag = tag.strip()
        return (tag[2:] if tag.startswith("W/") else tag).strip('"')

    return bare(ours) == bare(theirs)


def range_problem(
    status: int, reply: dict[str, str], etag: str, start: int, end: int, size: int
) -> S3Error | None:
    """What is wrong with the answer to a GET of bytes start..end of a `size`-byte
    object whose ETag is `etag`, or None when it is exactly that.

    The part asked for comes back as 206 with its own Content-Range. 200 (the whole
    object) is HTTP's answer to a range that is the whole object, and only to that: for
    any other part it is the wrong bytes, and written at the part's offset it makes the
    file longer than the object. The ETag must be the one listed: a server that ignores
    If-Match sends another version's bytes.
    """
    whole = end < start or (start == 0 and end == size - 1)
    if status == 206:
        match = _CONTENT_RANGE.match(reply.get("content-range", "").strip())
        asked = f"bytes {start}-{end}/{size}"
        if not match or tuple(int(n) for n in match.groups()) != (start, end, size):
            got = reply.get("content-range") or "no Content-Range"
            return S3Error("WrongRange", status, f"asked for {asked}, the server sent {got}")
    elif status != 200 or not whole:
        return S3Error(
            "WrongRange", status, f"asked for bytes {start}-{end}, the server answered {status}"
        )
    if etag and not same_etag(etag, reply.get("etag", "")):
        got = reply.get("etag") or "none"
        return S3Error("ETagMismatch", status, f"asked for ETag {etag}, the server sent {got}")
    return None


class Client:
    """The S3 calls anylaunch makes, signed with SigV4; one connection per thread and host.

    With an endpoint (S3_ENDPOINT_URL: MinIO, moto, a provider's gateway) requests are
    path-style, which every S3-compatible server accepts; on AWS itself they go to the
    bucket's virtual host.
    """

    RETRIES = 8

    def __init__(self, credentials: Credentials | None = None, timeout: float = 120.0) -> None:
        self.creds = credentials or Credentials.from_env()
        self.timeout = timeout
        self._local = threading.local()
        self.calls: dict[str, int] = {}  # operation -> count, for tests and the bench
        self._calls_lock = threading.Lock()

    # -- transport

    def _where(self, bucket: str, key: str) -> tuple[str, str, str]:
        """(scheme, host, path) of an object or bucket."""
        if self.creds.endpoint:
            parsed = urllib.parse.urlsplit(self.creds.endpoint)
            base = parsed.path.rstrip("/")
            path = f"{base}/{bucket}" + (f"/{key}" if key else "/" if not base else "")
            return parsed.scheme or "https", parsed.netloc, path
        region = self.creds.region
        if "." in bucket:
            return "https", f"s3.{region}.amazonaws.com", f"/{bucket}/{key}"
        return "https", f"{bucket}.s3.{region}.amazonaws.com", f"/{key}"

    def _connection(self, scheme: str, host: str) -> http.client.HTTPConnection:
        pool = getattr(self._local, "pool", None)
        if pool is None:
            pool = self._local.pool = {}
        conn = pool.get((scheme, host))
        if conn is None:
            kind = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
            conn = pool[(scheme, host)] = kind(host, timeout=self.timeout)
        return conn

    def _drop(self, scheme: str, host: str) -> None:
        conn = self._local.pool.pop((scheme, host), None)
        if conn is not None:
            conn.close()

    def _sign(
        self,
        method: str,
        host: str,
        path: str,
        query: list[tuple[str, str]],
        headers: dict[str, str],
        payload_hash: str,
        now: datetime.datetime | None = None,
    ) -> dict[str, str]:
        now = now or datetime.datetime.now(datetime.timezone.utc)
        stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
        out = dict(headers)
        out["host"] = host
        out["x-amz-date"] = stamp
        out["x-amz-content-sha256"] = payload_hash
        if self.creds.token:
            out["x-amz-security-token"] = self.creds.token
        if not self.creds.present:
            return out  # anonymous: public buckets only
        names = sorted(k.lower() for k in out)
        lower = {k.lower(): " ".join(str(v).strip().split()) for k, v in out.items()}
        canonical = "\n".join(
            [
                method,
                _quote(path),
                "&".join(f"{_quote(k, '')}={_quote(v, '')}" for k, v in sorted(query)),
                "".join(f"{n}:{lower[n]}\n" for n in names),
                ";".join(names),
                payload_hash,
            ]
        )
        scope = f"{day}/{self.creds.region}/s3/aws4_request"
        to_sign = "\n".join(
            ["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()]
        )
        key = _hmac(("AWS4" + self.creds.secret_key).encode(), day)
        for part in (self.creds.region, "s3", "aws4_request"):
            key = _hmac(key, part)
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        out["Authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={self.creds.access_key}/{scope}, "
            f"SignedHeaders={';'.join(names)}, Signature={signature}"
        )
        return out  # with `host` set, http.client sends exactly the Host that was signed

    def request(
        self,
        op: str,
        method: str,
        bucket: str,
        key: str = "",
        query: list[tuple[str, str]] | None = None,
        headers: dict[str, str] | None = None,
        body: bytes = b"",
        sink: Callable[[Any], None] | None = None,
        check: Callable[[int, dict[str, str]], S3Error | None] | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        """One call, retried on network errors, 5xx and throttling; errors raise S3Error.

        With `sink` (a callable taking bytes) a 2xx body is streamed to it, not returned;
        `check` sees the status and headers first, and what it returns is raised before
        a byte reaches the sink. A sink may raise S3Error to stop reading.
        """
        with self._calls_lock:
            self.calls[op] = self.calls.get(op, 0) + 1
        scheme, host, path = self._where(bucket, key)
        query = query or []
        target = _quote(path) + (
            "?" + "&".join(f"{_quote(k, '')}={_quote(v, '')}" for k, v in query) if query else ""
        )
        payload_hash = hashlib.sha256(body).hexdigest() if body else _EMPTY_SHA256
        if method == "GET" or method == "HEAD":
            payload_hash = _EMPTY_SHA256
        delay = 0.2
        for attempt in range(self.RETRIES):
            signed = self._sign(method, host, path, query, headers or {}, payload_hash)
            if body or method in ("PUT", "POST"):
                signed["Content-Length"] = str(len(body))
            conn = self._connection(scheme, host)
            received = 0
            try:
                conn.request(method, target, body=body or None, headers=signed)
                resp = conn.getresponse()
                status = resp.status
                reply = {k.lower(): v for k, v in resp.getheaders()}
                if 200 <= status < 300 and sink is not None and method != "HEAD":
                    wrong = check(status, reply) if check is not None else None
                    if wrong is not None:
                        raise wrong
                    buffer = bytearray(MiB)
                    view = memoryview(buffer)
                    while True:
                        n = resp.readinto(view)
                        if not n:
                            break
                        sink(view[:n])
                        received += n
                    if "content-length" in reply and received != int(reply["content-length"]):
                        raise http.client.IncompleteRead(b"", int(reply["content-length"]))
                    return status, reply, b""
                data = resp.read() if method != "HEAD" else b""
            except S3Error:
                self._drop(scheme, host)  # a body left unread: the connection is spent
                raise
            except (OSError, http.client.HTTPException) as exc:
                self._drop(scheme, host)
                if received or attempt == self.RETRIES - 1:
                    # bytes already went to the sink: the caller restarts the whole range
                    raise S3Error("NetworkError", 0, f"{type(exc).__name__}: {exc}") from None
                time.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 10.0)
                continue
            if reply.get("connection", "").lower() == "close":
                self._drop(scheme, host)
            if 200 <= status < 300:
                return status, reply, data
            code, message = str(status), ""
            if data:
                try:
                    root = _xml(data)
                    code = root.findtext("Code") or code
                    message = root.findtext("Message") or ""
                except ET.ParseError:
                    pass
            if (status >= 500 or code in ("SlowDown", "Throttling", "RequestTimeout")) and (
                attempt < self.RETRIES - 1
            ):
                time.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 10.0)
                continue
            raise S3Error(code, status, message)
        raise S3Error("NetworkError", 0, "no response")  # not reached

    # -- calls

    def head_object(self, bucket: str, key: str) -> tuple[str, int]:
        """(ETag, size) of one object; S3Error with code '404' when there is none."""
        _, reply, _ = self.request("HeadObject", "HEAD", bucket, key)
        return reply.get("etag", ""), int(reply.get("content-length", "0"))

    def head_bucket(self, bucket: str) -> None:
        self.request("HeadBucket", "HEAD", bucket)

    def list_objects(
        self, bucket: str, prefix: str, max_keys: int = 1000
    ) -> Iterator[tuple[str, str, int]]:
        """(key, ETag, size) of every object under a prefix, 1,000 a call."""
        token = ""
        while True:
            query = [("list-type", "2"), ("prefix", prefix), ("max-keys", str(max_keys))]
            if token:
                query.append(("continuation-token", token))
            _, _, data = self.request("ListObjectsV2", "GET", bucket, query=query)
            root = _xml(data)
            for item in root.findall("Contents"):
                yield (
                    item.findtext("Key") or "",
                    item.findtext("ETag") or "",
                    int(item.findtext("Size") or 0),
                )
            token = root.findtext("NextContinuationToken") or ""
            if (root.findtext("IsTruncated") or "").lower() != "true" or not token:
                return

    def get_range(
        self,
        bucket: str,
        key: str,
        etag: str,
        start: int,
        end: int,
        size: int,
        sink: Callable[[Any], None],
    ) -> None:
        """Bytes start..end (inclusive; end < start for an empty object) of the `size`-byte
        object version whose ETag is `etag`, to `sink`.

        Anything but exactly those bytes raises S3Error: a wrong status, Content-Range
        or ETag before any byte reaches `sink` (`range_problem`), a wrong length as soon
        as it shows.
        """
        headers = {"If-Match": etag} if etag else {}
        if end >= start:
            headers["Range"] = f"bytes={start}-{end}"
        want = end - start + 1 if end >= start else 0
        got = [0]

        def check(status: int, reply: dict[str, str]) -> S3Error | None:
            return range_problem(status, reply, etag, start, end, size)

        def counted(chunk: Any) -> None:
            got[0] += len(chunk)
            if got[0] > want:
                raise S3Error("WrongLength", 0, f"more than the {want} bytes asked for")
            sink(chunk)

        self.request("GetObject", "GET", bucket, key, headers=headers, sink=counted, check=check)
        if got[0] != want:
            raise S3Error("WrongLength", 0, f"{got[0]} bytes of the {want} asked for")

    def get_bytes(self, bucket: str, key: str) -> bytes:
        return self.request("GetObject", "GET", bucket, key)[2]

    def put_object(self, bucket: str, key: str, body: bytes) -> str:
        return self.request("PutObject", "PUT", bucket, key, body=body)[1].get("etag", "")

    def delete_object(self, bucket: str, key: str) -> None:
        self.request("DeleteObject", "DELETE", bucket, key)

    def create_multipart_upload(self, bucket: str, key: str) -> str:
        _, _, data = self.request(
            "CreateMultipartUpload", "POST", bucket, key, query=[("uploads", "")]
        )
        return _xml(data).findtext("UploadId") or ""

    def upload_part(self, bucket: str, key: str, upload_id: str, number: int, body: bytes) -> str:
        query = [("partNumber", str(number)), ("uploadId", upload_id)]
        return self.request("UploadPart", "PUT", bucket, key, query=query, body=body)[1]["etag"]

    def list_parts(self, bucket: str, key: str, upload_id: str) -> dict[int, str]:
        parts: dict[int, str] = {}
        marker = ""
        while True:
            query = [("uploadId", upload_id)]
            if marker:
                query.append(("part-number-marker", marker))
            _, _, data = self.request("ListParts", "GET", bucket, key, query=query)
            root = _xml(data)
            for part in root.findall("Part"):
                parts[int(part.findtext("PartNumber") or 0)] = part.findtext("ETag") or ""
            marker = root.findtext("NextPartNumberMarker") or ""
            if (root.findtext("IsTruncated") or "").lower() != "true" or not marker:
                return parts

    def complete_multipart_upload(
        self, bucket: str, key: str, upload_id: str, parts: dict[int, str]
    ) -> str:
        body = "<CompleteMultipartUpload>{}</CompleteMultipartUpload>".format(
            "".join(
                f"<Part><PartNumber>{n}</PartNumber><ETag>{_escape(parts[n])}</ETag></Part>"
                for n in sorted(parts)
            )
        ).encode()
        _, _, data = self.request(
            "CompleteMultipartUpload",
            "POST",
            bucket,
            key,
            query=[("uploadId", upload_id)],
            body=body,
        )
        root = _xml(data)
        if root.tag == "Error":  # S3 may report a failure inside a 200 response
            raise S3Error(
                root.findtext("Code") or "InternalError", 200, root.findtext("Message") or ""
            )
        return root.findtext("ETag") or ""
