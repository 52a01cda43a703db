"""Stage-in and stage-out, as the job's staging manifest says.

Stage-in brings every S3 input into the cache (`download.sync`), unpacks an archive
once per version when asked, and shows each input at its path in the working directory
as a link; a local input is linked in place. Outputs on a shared filesystem are written
in the cache's tree from the start. Stage-out uploads every output file (`upload`).
"""

from __future__ import annotations

import os
import re
import shutil
import tarfile
from concurrent.futures import ThreadPoolExecutor

from .cache import META_DIR, Cache, StageError, key_parts
from .download import Summary, is_prefix, sync
from .progress import Progress
from .s3 import Client, concurrency
from .upload import Uploader, UploadSummary

TYPE_CHECKING = False  # typing's own flag, without importing typing at start
if TYPE_CHECKING:
    from typing import Any

ARCHIVES = (".tar", ".tar.gz", ".tgz")


# -- URIs -------------------------------------------------------------------------------


def parse_s3(text: str) -> tuple[str, str]:
    """`s3://bucket/key` -> (bucket, key); the submit side has already validated it."""
    if not text.startswith("s3://"):
        raise StageError(f"{text}: not an s3:// URI")
    bucket, _, key = text[len("s3://") :].partition("/")
    return bucket, key


def has_scheme(text: str) -> bool:
    return re.match(r"^[A-Za-z][A-Za-z0-9+.\-]*://", text) is not None


# -- stage-in ---------------------------------------------------------------------------


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
    client: Client | None, manifest: dict[str, Any], item: dict[str, Any], summary: Summary
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
        # The ETag names the version; it comes from the server, so it never names a path.
        version = re.sub(r"[^A-Za-z0-9_-]", "_", objects[0][1].strip('"'))
        unpacked = os.path.join(cache.root, META_DIR, "unpacked", *key_parts(bucket, key))
        source = unpack(source, f"{unpacked}@{version}")
    place(link, source)
    return source


def stage_in(manifest: dict[str, Any], client: Client | None = None) -> Summary:
    summary = Summary()
    if client is None and any(has_scheme(i["uri"]) for i in manifest.get("inputs", [])):
        client = Client()
    for item in manifest.get("inputs", []):
        stage_input(client, manifest, item, summary)
    cache_root = manifest.get("cache_root")
    for item in manifest.get("outputs", []):
        target = os.path.join(manifest["workdir"], item["path"])
        if os.path.islink(target):
            # Made for an earlier job in this folder (its output URI, its cache): this
            # job's files would go there and that job's files would upload as this one's.
            os.unlink(target)
        if cache_root and not os.path.exists(target):
            # Outputs on a shared filesystem are written there first.
            home = Cache(cache_root).path(*parse_s3(item["uri"]))
            os.makedirs(home, exist_ok=True)
            place(target, home)
        elif not os.path.exists(target):
            os.makedirs(target)
    return summary


# -- stage-out --------------------------------------------------------------------------


def _files(root: str) -> list[str]:
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


def _output_home(manifest: dict[str, Any], item: dict[str, Any], root: str) -> str:
    """Where an output's files may really lie: its path under the working directory, or
    its place in the shared cache (stage-in links it there). An output path the program
    replaced by a link elsewhere (or reached through one) is refused: every file there
    would pass as inside it."""
    real = os.path.realpath(root)
    allowed = [os.path.join(os.path.realpath(manifest["workdir"]), os.path.normpath(item["path"]))]
    if manifest.get("cache_root"):
        allowed.append(os.path.realpath(Cache(manifest["cache_root"]).path(*parse_s3(item["uri"]))))
    if real in allowed:
        return real
    raise StageError(f"{root}: a link to {real}, out of the working directory — not uploaded")


def _no_outside_names(files: list[str], root: str) -> None:
    """Refuse a file with more names (hard links) than the outputs hold: its content is
    a file elsewhere, which a link check by path cannot see."""
    names: dict[tuple[int, int], list[str]] = {}
    for path in files:
        st = os.lstat(path)
        names.setdefault((st.st_dev, st.st_ino), []).append(path)
    for paths in names.values():
        if os.lstat(paths[0]).st_nlink > len(paths):
            raise StageError(
                f"{paths[0]}: a hard link to a file outside the output directory {root}"
                " — not uploaded (write a copy there instead)"
            )


def stage_out(manifest: dict[str, Any], client: Client | None = None) -> UploadSummary:
    summary = UploadSummary()
    if not manifest.get("outputs"):
        return summary
    client = client or Client()
    jobs: list[tuple[str, str, str]] = []
    for item in manifest["outputs"]:
        root = os.path.join(manifest["workdir"], item["path"])
        if not os.path.exists(root):
            continue  # the program wrote nothing there
        bucket, key = parse_s3(item["uri"])
        real_base = _output_home(manifest, item, root)
        found = _files(root)
        if os.path.isfile(root) and not is_prefix(key):
            _no_outside_names(found, root)
            jobs.append((root, bucket, key))
            continue
        base = root if os.path.isdir(root) else os.path.dirname(root)
        prefix = key if is_prefix(key) else key + "/"
        for path in found:
            # Path safety: a link inside the outputs must not upload what lies outside them.
            if not _inside(os.path.realpath(path), real_base):
                raise StageError(
                    f"{path}: a link out of the output directory {root} — not uploaded"
                )
            relative = os.path.relpath(path, base).replace(os.sep, "/")
            jobs.append((path, bucket, prefix + relative))
        _no_outside_names(found, root)
    summary.files = len(jobs)
    with ThreadPoolExecutor(concurrency()) as parts, ThreadPoolExecutor(concurrency()) as files:
        uploader = Uploader(client, manifest, summary, parts)
        uploader.progress = Progress(
            "stage-out", sum(os.stat(p).st_size for p, _, _ in jobs), len(jobs)
        )
        list(files.map(lambda job: uploader.upload(*job), jobs))
        uploader.progress.close()
    return summary
