"""anylaunch's steps inside a job, in one file that needs Python >= 3.8 and nothing else.

A job's image may be anything with a `python3` (an NGC or TAO container, a bare
distribution): no anylaunch, no boto3, no pip, no network beyond the S3 endpoint. So
this file imports only the standard library, is written into the job by its backend
(next to the job's other files, or through a heredoc in the command) and runs as

    python3 -I -S anylaunch_job.py stage in|out MANIFEST   # S3 staging through the cache
    python3 -I -S anylaunch_job.py newest DIR               # the checkpoint to resume from
    python3 -I -S anylaunch_job.py fill-recipe FILE DEFAULT # restore_from.path in a recipe

`-I -S`: the user's PYTHONPATH, site-packages and sitecustomize can neither help nor
break it. The submit side imports the same file as `anylaunch.runtime.anylaunch_job`, so
there is one S3 client, one cache and one checkpoint rule.

S3: SigV4-signed requests over http.client, threads for parallel ranged GETs (each
pinned with If-Match to the ETag that was listed, so a file never mixes two versions),
multipart uploads that resume from the parts S3 already holds (ListParts).

The cache: `s3://bucket/key` lives at `<root>/bucket/key`, the bucket's own tree. Each
cached object has a record of the ETag and size it was fetched from (kept apart, under
`<root>/.anylaunch/meta/`), so a warm cache costs one LIST per prefix and a changed
object is refetched. Files appear only complete (written to a temporary name, renamed
when done), under a per-object lock so concurrent jobs fetch an object once.
"""

from __future__ import annotations

import os
import re
import sys

if sys.version_info < (3, 8):
    sys.stderr.write(
        "anylaunch: python3 in this image is %d.%d; anylaunch's in-job steps need 3.8 or newer\n"
        % sys.version_info[:2]
    )
    sys.exit(127)

TYPE_CHECKING = False  # typing's own flag, without importing typing at start
if TYPE_CHECKING:
    # What `_import_staging` binds at run time, so the type checker knows the names.
    import configparser
    import contextlib
    import datetime
    import fcntl
    import hashlib
    import hmac
    import http.client
    import json
    import random
    import shutil
    import tarfile
    import threading
    import time
    import urllib.parse
    import xml.etree.ElementTree as ET
    from concurrent.futures import ThreadPoolExecutor
    from typing import Any, Dict, Iterator, List, Optional, Tuple

    Remote = Tuple[str, str, int]  # key, ETag, size


def _import_staging() -> None:
    """Import what staging needs, when it runs: `newest` and `fill-recipe` run before the
    program on every attempt and must start as fast as python3 itself."""
    global configparser, contextlib, datetime, fcntl, hashlib, hmac, http, json
    global random, shutil, tarfile, threading, time, urllib, ET, ThreadPoolExecutor
    import configparser
    import contextlib
    import datetime
    import fcntl
    import hashlib
    import hmac
    import http.client
    import json
    import random
    import shutil
    import tarfile
    import threading
    import time
    import urllib.parse
    import xml.etree.ElementTree as ET
    from concurrent.futures import ThreadPoolExecutor


MiB = 1024 * 1024
META_DIR = ".anylaunch"
PLACEHOLDER = "@@ANYLAUNCH_RESUME_FROM@@"
ARCHIVES = (".tar", ".tar.gz", ".tgz")
_BATCH = 256  # objects locked at once: bounds the number of open lock files
_UNSIGNED = "UNSIGNED-PAYLOAD"
_EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"  # of b""


class StageError(Exception):
    """An input or output that cannot be staged; the message says which and why."""


# -- settings -----------------------------------------------------------------------------


def env_int(name: str, default: int, environ: Optional[Dict[str, str]] = None) -> int:
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


# -- S3 ---------------------------------------------------------------------------------


class S3Error(Exception):
    """An S3 error response (code such as NoSuchKey, AccessDenied, 404) or a network failure."""

    def __init__(self, code: str, status: int = 0, message: str = "") -> None:
        super().__init__(f"{code}: {message}" if message else code)
        self.code, self.status, self.message = code, status, message


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
    def from_env(cls, environ: Optional[Dict[str, str]] = None) -> "Credentials":
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


def _shared_file(env: Dict[str, str], region: Optional[str]) -> Tuple[str, str, str, Optional[str]]:
    _import_staging()
    profile = env.get("AWS_PROFILE") or "default"
    home = os.path.expanduser("~")
    creds = configparser.ConfigParser()
    creds.read(env.get("AWS_SHARED_CREDENTIALS_FILE") or os.path.join(home, ".aws", "credentials"))
    config = configparser.ConfigParser()
    config.read(env.get("AWS_CONFIG_FILE") or os.path.join(home, ".aws", "config"))
    section = creds[profile] if creds.has_section(profile) else {}
    conf_name = profile if profile == "default" else "profile " + profile
    conf = config[conf_name] if config.has_section(conf_name) else {}
    return (
        section.get("aws_access_key_id", ""),
        section.get("aws_secret_access_key", ""),
        section.get("aws_session_token", ""),
        region or conf.get("region"),
    )


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


class Client:
    """The S3 calls anylaunch makes, signed with SigV4; one connection per thread and host.

    With an endpoint (S3_ENDPOINT_URL: MinIO, moto, a provider's gateway) requests are
    path-style, which every S3-compatible server accepts; on AWS itself they go to the
    bucket's virtual host.
    """

    RETRIES = 8

    def __init__(self, credentials: Optional[Credentials] = None, timeout: float = 120.0) -> None:
        _import_staging()
        self.creds = credentials or Credentials.from_env()
        self.timeout = timeout
        self._local = threading.local()
        self.calls: Dict[str, int] = {}  # operation -> count, for tests and the bench
        self._calls_lock = threading.Lock()

    # -- transport

    def _where(self, bucket: str, key: str) -> Tuple[str, str, str]:
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
        query: List[Tuple[str, str]],
        headers: Dict[str, str],
        payload_hash: str,
        now: Optional[datetime.datetime] = None,
    ) -> Dict[str, str]:
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
        query: Optional[List[Tuple[str, str]]] = None,
        headers: Optional[Dict[str, str]] = None,
        body: bytes = b"",
        sink: Any = None,
    ) -> Tuple[int, Dict[str, str], bytes]:
        """One call, retried on network errors, 5xx and throttling; errors raise S3Error.

        With `sink` (a callable taking bytes) a 2xx body is streamed to it, not returned.
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

    def head_object(self, bucket: str, key: str) -> Tuple[str, int]:
        """(ETag, size) of one object; S3Error with code '404' when there is none."""
        _, reply, _ = self.request("HeadObject", "HEAD", bucket, key)
        return reply.get("etag", ""), int(reply.get("content-length", "0"))

    def head_bucket(self, bucket: str) -> None:
        self.request("HeadBucket", "HEAD", bucket)

    def list_objects(
        self, bucket: str, prefix: str, max_keys: int = 1000
    ) -> Iterator[Tuple[str, str, int]]:
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

    def get_range(self, bucket: str, key: str, etag: str, start: int, end: int, sink: Any) -> None:
        """Bytes start..end (inclusive) of the object version whose ETag is `etag`."""
        headers = {"If-Match": etag}
        if end >= start:
            headers["Range"] = f"bytes={start}-{end}"
        self.request("GetObject", "GET", bucket, key, headers=headers, sink=sink)

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

    def list_parts(self, bucket: str, key: str, upload_id: str) -> Dict[int, str]:
        parts: Dict[int, str] = {}
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
        self, bucket: str, key: str, upload_id: str, parts: Dict[int, str]
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


def _escape(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


def error_code(exc: BaseException) -> str:
    return exc.code if isinstance(exc, S3Error) else type(exc).__name__


# -- URIs -------------------------------------------------------------------------------


def parse_s3(text: str) -> Tuple[str, str]:
    """`s3://bucket/key` -> (bucket, key); the submit side has already validated it."""
    if not text.startswith("s3://"):
        raise StageError(f"{text}: not an s3:// URI")
    bucket, _, key = text[len("s3://") :].partition("/")
    return bucket, key


def is_prefix(key: str) -> bool:
    return key == "" or key.endswith("/")


def has_scheme(text: str) -> bool:
    return re.match(r"^[A-Za-z][A-Za-z0-9+.\-]*://", text) is not None


# -- progress ---------------------------------------------------------------------------


class Progress:
    """A byte counter fed from many threads; one line in the job's log every 5 seconds."""

    def __init__(
        self, label: str, total_bytes: int, total_files: int, every_s: float = 5.0
    ) -> None:
        _import_staging()
        self.label, self.total, self.files = label, total_bytes, total_files
        self.done_bytes = self.done_files = 0
        self.started = self._last = time.monotonic()
        self._every = every_s
        self._lock = threading.Lock()

    def bytes(self, count: int) -> None:
        with self._lock:
            self.done_bytes += count
            if time.monotonic() - self._last >= self._every:
                self._last = time.monotonic()
                self._line()

    def file_done(self) -> None:
        with self._lock:
            self.done_files += 1

    def _line(self) -> None:
        elapsed = max(time.monotonic() - self.started, 1e-6)
        sys.stderr.write(
            f"anylaunch-stage: {self.label}: {self.done_files}/{self.files} files,"
            f" {self.done_bytes / MiB:.1f}/{self.total / MiB:.1f} MiB,"
            f" {self.done_bytes / MiB / elapsed:.1f} MiB/s\n"
        )
        sys.stderr.flush()

    def close(self) -> float:
        with self._lock:
            self._line()
        return time.monotonic() - self.started


# -- the cache --------------------------------------------------------------------------


def temp_name(target: str) -> str:
    """A new, unique sibling of `target`: same filesystem, so the final rename is atomic."""
    folder, name = os.path.split(target)
    os.makedirs(folder or ".", exist_ok=True)
    while True:
        tmp = os.path.join(folder, f".{name}.{os.urandom(6).hex()}.part")
        try:
            os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            return tmp
        except FileExistsError:
            continue


def atomic_write(target: str, text: str) -> None:
    tmp = temp_name(target)
    with open(tmp, "w") as handle:
        handle.write(text)
    os.replace(tmp, target)


class Cache:
    def __init__(self, root: str) -> None:
        _import_staging()
        self.root = root

    def path(self, bucket: str, key: str) -> str:
        return os.path.join(self.root, bucket, key)

    def _meta(self, bucket: str, key: str) -> str:
        return os.path.join(self.root, META_DIR, "meta", bucket, key + ".json")

    def is_fresh(self, bucket: str, key: str, etag: str, size: int) -> bool:
        """A metadata-only check: the record matches the listing and the file is whole."""
        try:
            with open(self._meta(bucket, key)) as handle:
                record = json.load(handle)
            return (
                record.get("etag") == etag
                and record.get("size") == size
                and os.stat(self.path(bucket, key)).st_size == size
            )
        except (OSError, ValueError):
            return False

    def record(self, bucket: str, key: str, etag: str, size: int) -> None:
        meta = self._meta(bucket, key)
        os.makedirs(os.path.dirname(meta), exist_ok=True)
        atomic_write(meta, json.dumps({"etag": etag, "size": size}))

    def forget(self, bucket: str, key: str) -> None:
        for path in (self.path(bucket, key), self._meta(bucket, key)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    def recorded_keys(self, bucket: str, prefix: str) -> Iterator[str]:
        """Keys under `prefix` that this cache fetched (files it may remove again)."""
        base = os.path.join(self.root, META_DIR, "meta", bucket)
        start = os.path.join(base, prefix)
        top = start if os.path.isdir(start) else os.path.dirname(start)
        for folder, _, names in os.walk(top):
            for name in names:
                if name.endswith(".json"):
                    key = os.path.relpath(os.path.join(folder, name), base)[: -len(".json")]
                    if key.startswith(prefix):
                        yield key

    def lock(self, bucket: str, key: str) -> "ObjectLock":
        """Hold the right to fill one entry, waiting for the job that holds it now.

        The lock spans the whole download, so jobs filling the same cache fetch each
        object once: the others wait, then find it fresh.
        """
        handle = self._lock_file(bucket, key)
        fcntl.flock(handle, fcntl.LOCK_EX)
        return ObjectLock(handle)

    def try_lock(self, bucket: str, key: str) -> Optional["ObjectLock"]:
        """Like `lock`, but None at once when another job holds the entry."""
        handle = self._lock_file(bucket, key)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return None
        return ObjectLock(handle)

    def _lock_file(self, bucket: str, key: str) -> Any:
        path = self._meta(bucket, key)[: -len(".json")] + ".lock"
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return open(path, "a")  # closed by ObjectLock.release (or try_lock)


class ObjectLock:
    def __init__(self, handle: Any) -> None:
        self._handle = handle

    def release(self) -> None:
        fcntl.flock(self._handle, fcntl.LOCK_UN)
        self._handle.close()

    def __enter__(self) -> "ObjectLock":
        return self

    def __exit__(self, *_: object) -> None:
        self.release()


# -- stage-in ---------------------------------------------------------------------------


class Summary:
    def __init__(self) -> None:
        self.objects = self.fetched = self.bytes_fetched = self.bytes_total = self.removed = 0
        self.refreshed: List[str] = []

    def as_dict(self) -> Dict[str, Any]:
        return dict(vars(self))


def list_remote(client: Client, bucket: str, key: str) -> Tuple[str, List[Remote]]:
    """The objects behind a URI: one object (HEAD) or everything under a prefix (LIST).

    `s3://b/dir` without a slash is a prefix when no object has that exact key.
    Returns the resolved key (a prefix gains its slash) and the objects.
    """
    if not is_prefix(key):
        try:
            etag, size = client.head_object(bucket, key)
            return key, [(key, etag, size)]
        except S3Error as exc:
            if exc.status != 404:
                raise StageError(f"s3://{bucket}/{key}: cannot read ({exc.code})") from None
        key += "/"
    try:
        objects = [o for o in client.list_objects(bucket, key) if not o[0].endswith("/")]
    except S3Error as exc:
        raise StageError(f"s3://{bucket}/{key}: cannot list ({exc.code})") from None
    if not objects:
        raise StageError(
            f"{bucket}/{key.rstrip('/')}: no such object or prefix in S3 — check the exact path"
        )
    return key, objects


class _Download:
    """One object being fetched into a temporary file, in ranges on the shared pool."""

    def __init__(self, obj: Remote, tmp: str, lock: ObjectLock) -> None:
        self.obj, self.tmp, self.lock = obj, tmp, lock
        self.futures: List[Any] = []


def _fetch_range(
    client: Client, bucket: str, obj: Remote, tmp: str, start: int, end: int, progress: Progress
) -> None:
    key, etag, _ = obj
    for attempt in range(3):
        with open(tmp, "r+b") as handle:
            handle.seek(start)
            written = [0]

            def sink(chunk: Any, handle: Any = handle, written: List[int] = written) -> None:
                handle.write(chunk)
                written[0] += len(chunk)
                progress.bytes(len(chunk))

            try:
                client.get_range(bucket, key, etag, start, end, sink)
                return
            except S3Error as exc:
                progress.bytes(-written[0])  # these bytes are fetched again
                if exc.code != "NetworkError" or attempt == 2:
                    raise


def sync(
    client: Client, cache: Cache, bucket: str, key: str, summary: Summary, label: str
) -> Tuple[str, List[Remote]]:
    """Bring the cache's copy of a URI up to date; return the resolved key and its objects."""
    key, objects = list_remote(client, bucket, key)
    summary.objects += len(objects)
    summary.bytes_total += sum(o[2] for o in objects)
    stale = [o for o in objects if not cache.is_fresh(bucket, *o)]
    if is_prefix(key):  # objects deleted in S3 must disappear from the input too
        listed = {o[0] for o in objects}
        for old in list(cache.recorded_keys(bucket, key)):
            if old not in listed:
                cache.forget(bucket, old)
                summary.removed += 1
    if not stale:
        return key, objects
    progress = Progress(label, sum(o[2] for o in stale), len(stale))
    errors: List[str] = []
    # Ranges: at least the part size, larger when few big objects would leave streams
    # idle anyway (fewer requests for the same parallelism), at most 64 MiB (a retry
    # refetches one range).
    size = min(max(part_size(), -(-progress.total // concurrency())), 64 * MiB)

    def fetch(pool: ThreadPoolExecutor, batch: List[Remote]) -> List[Remote]:
        """Download what we can lock now; return what another job is fetching."""
        busy, pending = [], []
        for obj in batch:
            lock = cache.try_lock(bucket, obj[0])
            if lock is None:
                busy.append(obj)
                continue
            if cache.is_fresh(bucket, *obj):  # fetched by another job meanwhile
                lock.release()
                continue
            download = _Download(obj, temp_name(cache.path(bucket, obj[0])), lock)
            with open(download.tmp, "r+b") as handle:
                handle.truncate(obj[2])
            starts = range(0, obj[2], size) if obj[2] else [0]
            for start in starts:
                end = min(start + size, obj[2]) - 1
                download.futures.append(
                    pool.submit(
                        _fetch_range, client, bucket, obj, download.tmp, start, end, progress
                    )
                )
            pending.append(download)
        for download in pending:
            with download.lock:
                failure = None
                for future in download.futures:
                    try:
                        future.result()
                    except Exception as exc:  # the first failure names the object
                        failure = failure or exc
                if failure is not None:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(download.tmp)
                    errors.append(f"s3://{bucket}/{download.obj[0]}: {error_code(failure)}")
                    continue
                os.replace(download.tmp, cache.path(bucket, download.obj[0]))
                cache.record(bucket, *download.obj)
            progress.file_done()
            summary.fetched += 1
            summary.bytes_fetched += download.obj[2]
            summary.refreshed.append(download.obj[0])
        return busy

    with ThreadPoolExecutor(concurrency()) as pool:
        for start in range(0, len(stale), _BATCH):
            for obj in fetch(pool, stale[start : start + _BATCH]):
                with cache.lock(bucket, obj[0]):  # wait for the other job
                    pass
                if not cache.is_fresh(bucket, *obj):  # it failed: our turn
                    fetch(pool, [obj])
    progress.close()
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise StageError(
            f"download failed: {errors[0]}{more} — the object changed or is unreadable; rerun"
        )
    return key, objects


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _extract(tar: tarfile.TarFile, into: str) -> None:
    """Extract refusing absolute paths, `..` and links out of the tree (tarfile's 'data'
    filter where this Python has it, the same checks by hand where it does not)."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(into, filter="data")
        return
    root = os.path.realpath(into)
    for member in tar.getmembers():
        target = os.path.realpath(os.path.join(root, member.name))
        if not _inside(target, root) or member.isdev():
            raise StageError(f"{member.name}: points outside the archive's tree — not unpacked")
        if member.islnk() or member.issym():
            link = os.path.realpath(os.path.join(os.path.dirname(target), member.linkname))
            if os.path.isabs(member.linkname) or not _inside(link, root):
                raise StageError(f"{member.name}: a link out of the archive — not unpacked")
    tar.extractall(into)


def unpack(archive: str, into: str) -> str:
    """Unpack once per archive version; the tree appears whole (renamed when complete)."""
    if os.path.isdir(into):
        return into
    tmp = f"{into}.{os.getpid()}.part"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    with tarfile.open(archive) as tar:
        _extract(tar, tmp)
    try:
        os.replace(tmp, into)
    except OSError:  # another job finished first: theirs is identical
        shutil.rmtree(tmp, ignore_errors=True)
    return into


def place(link: str, target: str) -> None:
    """Make `link` show `target`, replacing only a link we made before."""
    if os.path.islink(link):
        os.unlink(link)
    elif os.path.exists(link):
        raise StageError(
            f"{link}: exists and is not a link made by anylaunch — choose another input path"
        )
    os.makedirs(os.path.dirname(os.path.abspath(link)), exist_ok=True)
    os.symlink(target, link, target_is_directory=os.path.isdir(target))


def stage_input(
    client: Optional[Client], manifest: Dict[str, Any], item: Dict[str, Any], summary: Summary
) -> str:
    link = os.path.join(manifest["workdir"], item["path"])
    if not has_scheme(item["uri"]):  # a local path: shown in place
        source = os.path.join(manifest["workdir"], item["uri"])
        if not os.path.exists(source):
            raise StageError(f"{item['uri']}: no such file or directory")
        place(link, source)
        return source
    assert client is not None
    cache = Cache(manifest.get("cache_root") or os.path.join(manifest["state_dir"], "inputs"))
    bucket, key = parse_s3(item["uri"])
    key, objects = sync(client, cache, bucket, key, summary, f"stage-in {item['path']}")
    source = cache.path(bucket, key)
    if is_prefix(key):
        os.makedirs(source, exist_ok=True)
    if item.get("unpack"):
        if not source.endswith(ARCHIVES):
            raise StageError(
                f"{item['uri']}: unpack is set but it is not a .tar, .tar.gz or .tgz archive"
            )
        version = objects[0][1].strip('"')
        source = unpack(
            source, os.path.join(cache.root, META_DIR, "unpacked", bucket, f"{key}@{version}")
        )
    place(link, source)
    return source


def stage_in(manifest: Dict[str, Any], client: Optional[Client] = None) -> Summary:
    _import_staging()
    summary = Summary()
    if client is None and any(has_scheme(i["uri"]) for i in manifest.get("inputs", [])):
        client = Client()
    for item in manifest.get("inputs", []):
        stage_input(client, manifest, item, summary)
    cache_root = manifest.get("cache_root")
    for item in manifest.get(
        "outputs", []
    ):  # outputs on a shared filesystem are written there first
        target = os.path.join(manifest["workdir"], item["path"])
        if cache_root and not os.path.exists(target) and not os.path.islink(target):
            home = Cache(cache_root).path(*parse_s3(item["uri"]))
            os.makedirs(home, exist_ok=True)
            place(target, home)
        elif not os.path.exists(target):
            os.makedirs(target)
    return summary


# -- stage-out --------------------------------------------------------------------------


class UploadSummary:
    def __init__(self) -> None:
        self.files = self.uploaded = self.skipped = self.bytes_uploaded = 0
        self.parts_sent = self.parts_resumed = 0

    def as_dict(self) -> Dict[str, Any]:
        return dict(vars(self))


def _files(root: str) -> List[str]:
    if os.path.isfile(root):
        return [root]
    out = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != META_DIR)
        for name in names:
            path = os.path.join(folder, name)
            if not name.endswith(".part") and os.path.isfile(path):
                out.append(path)
    return sorted(out)


def _load(path: str) -> Dict[str, Any]:
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


class Uploader:
    """Uploads files; big ones as multipart uploads whose id is kept in the job's state
    directory, so a rerun asks S3 which parts it holds and sends only the rest."""

    def __init__(
        self,
        client: Client,
        manifest: Dict[str, Any],
        summary: UploadSummary,
        pool: ThreadPoolExecutor,
    ) -> None:
        self.client, self.summary, self.pool = client, summary, pool
        self.state = os.path.join(manifest["state_dir"], "uploads")
        root = manifest.get("cache_root")
        self.cache = Cache(root) if root else None
        self.part_size = part_size()
        self.progress: Optional[Progress] = None
        self._lock = threading.Lock()

    def _state(self, kind: str, bucket: str, key: str) -> str:
        digest = hashlib.sha1(f"{bucket}/{key}".encode()).hexdigest()
        return os.path.join(self.state, kind, f"{digest}.json")

    def _count(self, **fields: int) -> None:
        with self._lock:
            for name, value in fields.items():
                setattr(self.summary, name, getattr(self.summary, name) + value)

    def upload(self, path: str, bucket: str, key: str) -> None:
        stat = os.stat(path)
        ident = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
        done = self._state("done", bucket, key)
        if _load(done).get("ident") == ident:
            self._count(skipped=1)
            if self.progress is not None:
                self.progress.file_done()
            return
        if stat.st_size <= self.part_size:
            with open(path, "rb") as handle:
                etag = self.client.put_object(bucket, key, handle.read())
            self._advance(stat.st_size)
        else:
            etag = self._multipart(path, bucket, key, ident)
        os.makedirs(os.path.dirname(done), exist_ok=True)
        atomic_write(done, json.dumps({"ident": ident, "etag": etag}))
        self._count(uploaded=1, bytes_uploaded=stat.st_size)
        if self.progress is not None:
            self.progress.file_done()
        if self.cache is not None and os.path.realpath(path) == os.path.realpath(
            self.cache.path(bucket, key)
        ):
            self.cache.record(bucket, key, etag, stat.st_size)

    def _advance(self, count: int) -> None:
        if self.progress is not None:
            self.progress.bytes(count)

    def _multipart(self, path: str, bucket: str, key: str, ident: Dict[str, int]) -> str:
        state_file = self._state("multipart", bucket, key)
        state = _load(state_file)
        parts: Optional[Dict[int, str]] = None
        if state.get("ident") == ident and state.get("part_size") == self.part_size:
            try:
                parts = self.client.list_parts(bucket, key, state["upload_id"])
            except S3Error as exc:
                if exc.code not in ("NoSuchUpload", "404"):
                    raise
        if parts is None:  # nothing to resume: a new upload
            upload_id = self.client.create_multipart_upload(bucket, key)
            state = {"ident": ident, "part_size": self.part_size, "upload_id": upload_id}
            os.makedirs(os.path.dirname(state_file), exist_ok=True)
            atomic_write(state_file, json.dumps(state))
            parts = {}
        upload_id = state["upload_id"]
        size = ident["size"]
        count = -(-size // self.part_size)
        self._count(parts_resumed=len(parts))
        self._advance(sum(min(self.part_size, size - (n - 1) * self.part_size) for n in parts))

        def send(number: int) -> Tuple[int, str]:
            with open(path, "rb") as handle:
                handle.seek((number - 1) * self.part_size)
                data = handle.read(self.part_size)
            etag = self.client.upload_part(bucket, key, upload_id, number, data)
            self._count(parts_sent=1)
            self._advance(len(data))
            return number, etag

        todo = [n for n in range(1, count + 1) if n not in parts]
        parts.update(dict(self.pool.map(send, todo)))
        etag = self.client.complete_multipart_upload(bucket, key, upload_id, parts)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(state_file)
        return etag


def stage_out(manifest: Dict[str, Any], client: Optional[Client] = None) -> UploadSummary:
    _import_staging()
    summary = UploadSummary()
    if not manifest.get("outputs"):
        return summary
    client = client or Client()
    jobs: List[Tuple[str, str, str]] = []
    for item in manifest["outputs"]:
        root = os.path.join(manifest["workdir"], item["path"])
        if not os.path.exists(root):
            continue  # the program wrote nothing there
        bucket, key = parse_s3(item["uri"])
        if os.path.isfile(root) and not is_prefix(key):
            jobs.append((root, bucket, key))
            continue
        base = root if os.path.isdir(root) else os.path.dirname(root)
        prefix = key if is_prefix(key) else key + "/"
        real_base = os.path.realpath(base)
        for path in _files(root):
            # Path safety: a link inside the outputs must not upload what lies outside them.
            if not _inside(os.path.realpath(path), real_base):
                raise StageError(
                    f"{path}: a link out of the output directory {root} — not uploaded"
                )
            relative = os.path.relpath(path, base).replace(os.sep, "/")
            jobs.append((path, bucket, prefix + relative))
    summary.files = len(jobs)
    with ThreadPoolExecutor(concurrency()) as parts, ThreadPoolExecutor(concurrency()) as files:
        uploader = Uploader(client, manifest, summary, parts)
        uploader.progress = Progress(
            "stage-out", sum(os.stat(p).st_size for p, _, _ in jobs), len(jobs)
        )
        list(files.map(lambda job: uploader.upload(*job), jobs))
        uploader.progress.close()
    return summary


# -- checkpoints ------------------------------------------------------------------------

MARKERS = (".complete", "COMPLETE", ".done", "DONE", ".metadata")
UNFINISHED = (".tmp", ".partial", ".incomplete", ".lock", ".part")


def is_complete(directory: str) -> bool:
    """A writer marked it complete: a marker in it or in one of its subfolders
    (torch.distributed.checkpoint writes `.metadata` last); `.incomplete` vetoes."""
    if os.path.exists(os.path.join(directory, ".incomplete")):
        return False
    try:
        subdirs = [e.path for e in os.scandir(directory) if e.is_dir() and e.name[0] != "."]
    except OSError:
        return False
    return any(
        os.path.exists(os.path.join(folder, marker))
        for folder in [directory, *subdirs]
        for marker in MARKERS
    )


def newest_checkpoint(directory: str) -> Optional[str]:
    """The newest complete checkpoint in `directory`, or None.

    1. a `LATEST`/`latest` pointer (a symlink, a file naming an entry, or a directory);
    2. else the complete entry with the highest step number (the last number in its name).
       A file counts unless its name says it is unfinished (files are written by rename).
    """
    directory = directory.rstrip("/") or "/"
    if not os.path.isdir(directory):
        return None
    for name in ("LATEST", "latest"):
        pointer = os.path.join(directory, name)
        if os.path.islink(pointer):
            target = os.path.realpath(pointer)
            if os.path.exists(target):
                return target
        elif os.path.isdir(pointer):
            return pointer
        elif os.path.isfile(pointer):
            with open(pointer) as handle:
                target = handle.readline().strip()
            if target and not os.path.isabs(target):
                target = os.path.join(directory, target)
            if target and os.path.exists(target):
                return target
    best, best_n = None, -1
    for entry in sorted(os.listdir(directory)):
        if entry.startswith(".") or entry.endswith(UNFINISHED):
            continue
        path = os.path.join(directory, entry)
        if os.path.isdir(path) and not is_complete(path):
            continue
        numbers = re.findall(r"[0-9]+", entry)
        if not numbers:
            continue
        n = int(numbers[-1])
        if n > best_n:
            best, best_n = path, n
    return best


def fill_recipe(path: str, default: str) -> str:
    """Put the checkpoint (ANYLAUNCH_RESUME_FROM, else `default`) into a rendered recipe.

    The file holds `'@@ANYLAUNCH_RESUME_FROM@@'` as a single-quoted YAML scalar, so the
    value is escaped by doubling single quotes.
    """
    value = os.environ.get("ANYLAUNCH_RESUME_FROM") or default
    with open(path) as handle:
        text = handle.read()
    atomic_write(path, text.replace(PLACEHOLDER, value.replace("'", "''")))
    return value


# -- the command line -------------------------------------------------------------------

USAGE = "usage: anylaunch_job.py stage in|out MANIFEST | newest DIR | fill-recipe FILE DEFAULT"


def _stage(direction: str, manifest_path: str) -> int:
    _import_staging()
    with open(manifest_path) as handle:
        manifest = json.load(handle)
    started = time.monotonic()
    try:
        summary = stage_in(manifest) if direction == "in" else stage_out(manifest)
    except (StageError, S3Error, OSError, ValueError) as exc:
        sys.stderr.write(f"anylaunch-stage: {direction}: error: {exc}\n")
        return 1
    result = summary.as_dict()
    result.pop("refreshed", None)
    result["seconds"] = round(time.monotonic() - started, 3)
    os.makedirs(manifest["state_dir"], exist_ok=True)
    atomic_write(
        os.path.join(manifest["state_dir"], f"stage-{direction}.json"),
        json.dumps({**summary.as_dict(), **result}),
    )
    sys.stderr.write(
        f"anylaunch-stage: {direction}: " + ", ".join(f"{k}={v}" for k, v in result.items()) + "\n"
    )
    return 0


def main(argv: List[str]) -> int:
    if argv[:1] == ["stage"] and len(argv) == 3 and argv[1] in ("in", "out"):
        return _stage(argv[1], argv[2])
    if argv[:1] == ["newest"] and len(argv) == 2:
        found = newest_checkpoint(argv[1])
        if found:
            print(found)
        return 0
    if argv[:1] == ["fill-recipe"] and len(argv) == 3:
        fill_recipe(argv[1], argv[2])
        return 0
    sys.stderr.write(USAGE + "\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
