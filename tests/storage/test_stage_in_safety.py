"""Stage-in writes only inside the cache.

Keys are names chosen by whoever writes a bucket. They are tried on a real server on
127.0.0.1, the devstack's moto, which stores `data/../x` as given, as S3 does.
Stage-in runs as a job runs it: the zipapp under a bare `python3 -I -S`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
