"""Stage-in writes only inside the cache, and keeps only exactly the object it listed.

Keys are names chosen by whoever writes a bucket, and answers are whatever the endpoint
sends. Both are tried on real servers on 127.0.0.1: the devstack's moto for keys (it
stores `data/../x` as given, as S3 does), an endpoint of our own for wrong answers.
Stage-in runs as a job runs it: the zipapp under a bare `python3 -I -S`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from tests.storage.hostile_s3 import LIST_EVERYTHING, MODES, etag, hostile

MiB = 1024 * 1024
BAD_KEY = "data/../../../escaped"  # from <tmp>/a/cache/<bucket>/data: <tmp>/a/escaped


def manifest(tmp_path: Path, uri: str) -> Path:
    path = tmp_path / "m.json"
    path.write_text(
        json.dumps(
            {
                "workdir": str(tmp_path / "work"),
                "state_dir": str(tmp_path / "state"),
                "cache_root": str(tmp_path / "a" / "cache"),
                "inputs": [{"path": "data", "uri": uri}],
            }
        )
    )
    (tmp_path / "work").mkdir(exist_ok=True)
    return path


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


# -- keys that would leave the cache --------------------------------------------------


@pytest.mark.parametrize("uri", ["s3://{bucket}/data/", "s3://{bucket}/" + BAD_KEY])
def test_a_key_that_leaves_the_cache_is_refused_before_a_byte_is_written(
    tmp_path, s3client, bucket, bare_s3, uri
):
    s3client.put_object(Bucket=bucket, Key="data/ok.bin", Body=b"ok")
    s3client.put_object(Bucket=bucket, Key=BAD_KEY, Body=b"evil")
    assert BAD_KEY in [o["Key"] for o in s3client.list_objects_v2(Bucket=bucket)["Contents"]]

    proc = bare_s3("stage", "in", str(manifest(tmp_path, uri.format(bucket=bucket))))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        f"anylaunch-stage: in: error: s3://{bucket}/{BAD_KEY}: a '..' part in the key would"
        " put the file outside its folder — not staged; rename the object"
    )
    assert not (tmp_path / "a" / "escaped").exists()
    assert files_under(tmp_path / "a") == []  # nothing fetched, not even the good object


def test_a_dot_part_is_refused_and_empty_parts_name_one_file(tmp_path, s3client, bucket, bare_s3):
    s3client.put_object(Bucket=bucket, Key="data/./a.bin", Body=b"a")
    proc = bare_s3("stage", "in", str(manifest(tmp_path, f"s3://{bucket}/data/")))
    assert proc.returncode == 1
    assert "data/./a.bin: a '.' part in the key would make it the file of another key" in (
        proc.stderr
    )
    s3client.delete_object(Bucket=bucket, Key="data/./a.bin")

    # `data//b.bin` is the file data/b.bin, as in any path; a warm cache keeps it.
    s3client.put_object(Bucket=bucket, Key="data//b.bin", Body=b"b")
    path = manifest(tmp_path, f"s3://{bucket}/data/")
    for fetched in (1, 0):
        proc = bare_s3("stage", "in", str(path))
        assert proc.returncode == 0, proc.stderr
        summary = json.loads((tmp_path / "state" / "stage-in.json").read_text())
        assert (summary["fetched"], summary["removed"]) == (fetched, 0)
        assert (tmp_path / "work" / "data" / "b.bin").read_bytes() == b"b"


def test_a_listing_with_keys_outside_the_prefix_is_refused(tmp_path, bare):
    objects = {"data/a.bin": b"a", "other/b.bin": b"b"}
    with hostile("bkt", objects, LIST_EVERYTHING) as server:
        proc = bare(
            "stage", "in", str(manifest(tmp_path, "s3://bkt/data/")), env=_env(server.endpoint)
        )
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == (
        "anylaunch-stage: in: error: s3://bkt/other/b.bin: listed under s3://bkt/data/ but"
        " not inside it — not staged; check the endpoint (S3_ENDPOINT_URL)"
    )
    assert files_under(tmp_path / "a") == []


JOB = """
launcher: none
command: [true]
inputs:
  data: {uri}
local:
  workdir: {work}
  cache_root: {cache}
"""


def test_anylaunch_run_refuses_such_a_key_in_the_job_file_and_in_the_bucket(
    cli, write, tmp_path, s3client, bucket, cli_env
):
    (tmp_path / "work").mkdir()
    where = {"work": tmp_path / "work", "cache": tmp_path / "a" / "cache"}
    in_file = write(JOB.format(uri=f"s3://{bucket}/{BAD_KEY}", **where), "in-file.yaml")
    result = cli("run", str(in_file), "--dry-run")
    assert result.rc == 2 and "Traceback" not in result.err
    assert f"in-file.yaml:4: inputs.data.uri: 's3://{bucket}/{BAD_KEY}': a '..' part" in (
        result.err
    )

    s3client.put_object(Bucket=bucket, Key="data/ok.bin", Body=b"ok")
    s3client.put_object(Bucket=bucket, Key=BAD_KEY, Body=b"evil")
    in_bucket = write(JOB.format(uri=f"s3://{bucket}/data/", **where), "in-bucket.yaml")
    checked = cli("run", str(in_bucket), env=cli_env)  # the pre-submit check lists it
    assert checked.rc == 2 and "Traceback" not in checked.err
    assert f"s3://{bucket}/data/ holds s3://{bucket}/{BAD_KEY}: a '..' part" in checked.err
    assert cli("ps", "--json").json() == []

    ran = cli("run", str(in_bucket), "--no-preflight", "--json", env=cli_env)  # the job itself
    job = cli("status", ran.json()["id"], "--json").json()
    assert job["state"] == "FAILED", job
    assert f"s3://{bucket}/{BAD_KEY}: a '..' part" in cli("logs", job["id"]).out
    assert not (tmp_path / "a" / "escaped").exists()
    assert files_under(tmp_path / "a") == []


# -- answers that are not the object ----------------------------------------------------


def _env(endpoint: str) -> dict[str, str]:
    return {"S3_ENDPOINT_URL": endpoint, "ACCESS_KEY": "k", "SECRET_KEY": "s"}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_wrong_answer_to_a_ranged_get_is_never_kept(tmp_path, bare, mode):
    body = os.urandom(12 * MiB)  # two ranges of 8 MiB
    with hostile("bkt", {"data/big.bin": body}, mode) as server:
        proc = bare(
            "stage", "in", str(manifest(tmp_path, "s3://bkt/data/")), env=_env(server.endpoint)
        )
    assert any(g.startswith("bytes=8388608-") for g in server.gets)  # ranges were asked for
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    error = proc.stderr.splitlines()[-1]
    assert error.startswith("anylaunch-stage: in: error: download failed: s3://bkt/data/big.bin: ")
    code = error.split("big.bin: ")[1].split(":")[0]
    assert code == {"other-version": "ETagMismatch", "longer-body": "WrongLength"}.get(
        mode, "WrongRange"
    )
    # Nothing of it is kept: no file, no record, no temporary left behind.
    assert files_under(tmp_path / "a") == ["cache/.anylaunch/meta/bkt/data/big.bin.lock"]
    assert not (tmp_path / "work" / "data" / "big.bin").exists()


def test_the_messages_say_what_was_asked_and_what_came(tmp_path, bare):
    body = os.urandom(12 * MiB)
    with hostile("bkt", {"data/big.bin": body}, "whole-body") as server:
        proc = bare(
            "stage", "in", str(manifest(tmp_path, "s3://bkt/data/")), env=_env(server.endpoint)
        )
    assert "WrongRange: asked for bytes 0-8388607, the server answered 200" in proc.stderr
    with hostile("bkt", {"data/big.bin": body}, "other-version") as server:
        proc = bare(
            "stage", "in", str(manifest(tmp_path, "s3://bkt/data/")), env=_env(server.endpoint)
        )
    other = etag(bytes(b ^ 0xFF for b in body))
    assert f"ETagMismatch: asked for ETag {etag(body)}, the server sent {other}" in proc.stderr


def test_an_object_that_fits_one_range_may_come_back_whole(tmp_path, bare):
    """200 with the whole object is HTTP's answer to a range that is the whole object."""
    body = os.urandom(MiB)
    with hostile("bkt", {"data/small.bin": body}, "whole-body") as server:
        proc = bare(
            "stage", "in", str(manifest(tmp_path, "s3://bkt/data/")), env=_env(server.endpoint)
        )
    assert server.gets == [f"bytes=0-{MiB - 1}"]
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "work" / "data" / "small.bin").read_bytes() == body
