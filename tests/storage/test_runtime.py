"""The in-job runtime: python3's standard library is all it needs, and it speaks S3 as
S3 expects (checked against AWS's published signing example, botocore's signer, and the
devstack S3 server), run the way a job runs it: `python3 -I -S anylaunch_job.py`."""

from __future__ import annotations

import ast
import datetime
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.storage.conftest import bare_python

from anylaunch import runtime
from anylaunch.runtime import anylaunch_job

MiB = 1024 * 1024


def test_the_runtime_imports_nothing_outside_the_standard_library():
    tree = ast.parse(runtime.source())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "a relative import: the file ships alone"
            names.add((node.module or "").split(".")[0])
    assert names, "no imports found: the check would prove nothing"
    assert names <= set(sys.stdlib_module_names), names - set(sys.stdlib_module_names)


def test_the_runtime_parses_as_python_3_8():
    ast.parse(runtime.source(), feature_version=(3, 8))


def test_under_a_bare_interpreter_only_standard_modules_load(runtime_file, tmp_path):
    probe = (
        "import importlib.util, sys;"
        " spec = importlib.util.spec_from_file_location('rt', sys.argv[1]);"
        " module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module);"
        " module._import_staging(); module.newest_checkpoint(sys.argv[2]);"
        " print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    proc = subprocess.run(
        [bare_python(), "-I", "-S", "-c", probe, str(runtime_file), str(tmp_path)],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = set(proc.stdout.split())
    assert "http" in loaded and "hashlib" in loaded
    assert loaded <= set(sys.stdlib_module_names) | {"__main__"}, loaded


def test_signatures_match_awss_published_example():
    """AWS's SigV4 example for S3 (GET /test.txt with a Range, 2013-05-24)."""
    creds = anylaunch_job.Credentials(
        "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "", "us-east-1", ""
    )
    headers = anylaunch_job.Client(creds)._sign(
        "GET",
        "examplebucket.s3.amazonaws.com",
        "/test.txt",
        [],
        {"Range": "bytes=0-9"},
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        now=datetime.datetime(2013, 5, 24, tzinfo=datetime.timezone.utc),
    )
    assert headers["Authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
    )


@pytest.mark.parametrize(
    ("key", "query"),
    [
        ("data/with space+plus=equals&amp/é🙂.bin", []),
        ("a~b_c-d.e/(1)[2]{3}!'*", [("uploadId", "a/b+c=="), ("partNumber", "3")]),
        ("", [("list-type", "2"), ("prefix", "x y/ü"), ("max-keys", "1000")]),
        ("k", [("uploads", "")]),
    ],
)
def test_signatures_match_botocores_for_awkward_keys_and_queries(key, query):
    from urllib.parse import quote

    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    url = "https://bkt.s3.eu-west-3.amazonaws.com/" + quote(key, safe="/~")
    if query:
        url += "?" + "&".join(f"{quote(k, safe='~')}={quote(v, safe='~')}" for k, v in query)
    now = datetime.datetime(2026, 11, 30, 12, 0, 0, tzinfo=datetime.timezone.utc)
    request = AWSRequest(method="GET", url=url, headers={"Range": "bytes=0-9"})
    # add_auth's steps with a fixed clock (add_auth itself reads the time)
    request.context["timestamp"] = now.strftime("%Y%m%dT%H%M%SZ")
    signer = S3SigV4Auth(Credentials("AKIDEXAMPLE", "secret/key+x", "tok"), "s3", "eu-west-3")
    signer._modify_request_before_signing(request)
    canonical = signer.canonical_request(request)
    theirs = signer.signature(signer.string_to_sign(request, canonical), request)

    creds = anylaunch_job.Credentials("AKIDEXAMPLE", "secret/key+x", "tok", "eu-west-3", "")
    ours = anylaunch_job.Client(creds)._sign(
        "GET",
        "bkt.s3.eu-west-3.amazonaws.com",
        "/" + key,
        query,
        {"Range": "bytes=0-9"},
        request.headers["X-Amz-Content-SHA256"],
        now,
    )
    assert ours["Authorization"].endswith(f"Signature={theirs}")


def _manifest(tmp_path: Path, bucket: str, **extra) -> Path:
    path = tmp_path / "m.json"
    path.write_text(
        json.dumps(
            {
                "workdir": str(tmp_path / "work"),
                "state_dir": str(tmp_path / "state"),
                "cache_root": str(tmp_path / "cache"),
                **extra,
            }
        )
    )
    (tmp_path / "work").mkdir(exist_ok=True)
    return path


def test_a_bare_python_stages_in_refetches_changes_and_a_warm_cache_only_lists(
    tmp_path, s3client, bucket, bare_s3, s3env
):
    blobs = {f"in/{i}.bin": os.urandom(100_000 + i) for i in range(6)}
    blobs["in/big.bin"] = os.urandom(19 * MiB)  # three ranged GETs of 8 MiB
    for key, body in blobs.items():
        s3client.put_object(Bucket=bucket, Key=key, Body=body)
    manifest = _manifest(tmp_path, bucket, inputs=[{"path": "data", "uri": f"s3://{bucket}/in/"}])
    first = bare_s3("stage", "in", str(manifest))
    assert first.returncode == 0, first.stderr
    for key, body in blobs.items():
        assert (tmp_path / "work" / "data" / key[3:]).read_bytes() == body
    assert json.loads((tmp_path / "state" / "stage-in.json").read_text())["fetched"] == 7

    s3client.put_object(Bucket=bucket, Key="in/1.bin", Body=b"changed")
    s3client.delete_object(Bucket=bucket, Key="in/2.bin")
    s3client.put_object(Bucket=bucket, Key="in/new.bin", Body=b"new")
    second = bare_s3("stage", "in", str(manifest))
    assert second.returncode == 0, second.stderr
    summary = json.loads((tmp_path / "state" / "stage-in.json").read_text())
    assert (summary["fetched"], summary["removed"]) == (2, 1)
    data = tmp_path / "work" / "data"
    assert (data / "1.bin").read_bytes() == b"changed" and (data / "new.bin").read_bytes() == b"new"
    assert not (data / "2.bin").exists()

    client = anylaunch_job.Client(anylaunch_job.Credentials.from_env(s3env))
    warm = anylaunch_job.stage_in(json.loads(manifest.read_text()), client)
    assert (warm.fetched, client.calls) == (0, {"ListObjectsV2": 1})


def test_a_range_is_pinned_to_the_etag_that_was_listed(s3client, bucket, s3env):
    s3client.put_object(Bucket=bucket, Key="obj", Body=b"version one")
    client = anylaunch_job.Client(anylaunch_job.Credentials.from_env(s3env))
    etag, size = client.head_object(bucket, "obj")
    s3client.put_object(Bucket=bucket, Key="obj", Body=b"version two")
    got: list[bytes] = []
    with pytest.raises(anylaunch_job.S3Error) as caught:
        client.get_range(bucket, "obj", etag, 0, size - 1, lambda chunk: got.append(bytes(chunk)))
    assert caught.value.status == 412 and not got


def test_a_missing_input_and_a_denied_bucket_fail_with_one_line(tmp_path, bucket, bare_s3):
    manifest = _manifest(tmp_path, bucket, inputs=[{"path": "d", "uri": f"s3://{bucket}/nope/"}])
    proc = bare_s3("stage", "in", str(manifest))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("anylaunch-stage: in: error:")
    assert "no such object or prefix" in proc.stderr


def test_an_image_without_python3_fails_with_one_line_naming_image_and_step(tmp_path):
    tools = tmp_path / "bin"  # a shell and coreutils, no python3
    tools.mkdir()
    for tool in ("bash", "mkdir", "dirname", "cat"):
        (tools / tool).symlink_to(shutil.which(tool))
    script = runtime.write_shell(
        '"/tmp/x/anylaunch_job.py"', "nvcr.io/nvidia/cuda:12.4.0-base", "stage-in"
    )
    proc = subprocess.run(
        [str(tools / "bash"), "-c", script + "\necho not reached"],
        env={"PATH": str(tools)},
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 127 and "not reached" not in proc.stdout
    assert proc.stderr == (
        "anylaunch: image nvcr.io/nvidia/cuda:12.4.0-base has no python3;"
        " the stage-in step needs python3 >= 3.8 (standard library only)\n"
    )


def test_the_command_carries_the_runtime_byte_for_byte(tmp_path):
    target = tmp_path / "deep" / "anylaunch_job.py"
    script = runtime.write_shell(f'"{target}"', "img", "resume")
    proc = subprocess.run(
        ["bash", "-c", script], env={"PATH": f"{Path(bare_python()).parent}:/usr/bin:/bin"}
    )
    assert proc.returncode == 0 and target.read_text() == runtime.source()


def _newest(bare, directory: Path) -> str:
    proc = bare("newest", str(directory))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_the_newest_complete_checkpoint_by_markers_numbers_and_pointers(tmp_path, bare):
    ckpt = tmp_path / "ckpt"
    assert _newest(bare, ckpt) == ""  # no folder yet: a first attempt
    (ckpt / "step_100" / "model").mkdir(parents=True)
    (ckpt / "step_100" / "model" / ".metadata").write_text("")  # torch DCP, in a subfolder
    (ckpt / "step_200").mkdir()  # cut off: no marker
    (ckpt / "step_300").mkdir()
    (ckpt / "step_300" / "COMPLETE").write_text("")
    (ckpt / "step_300" / ".incomplete").write_text("")  # vetoed
    (ckpt / "step-9.ckpt.tmp").write_text("")  # a file being written (renamed when done)
    assert _newest(bare, ckpt) == str(ckpt / "step_100")
    (ckpt / "step-150.ckpt").write_text("")  # a file written by rename is complete
    assert _newest(bare, ckpt) == str(ckpt / "step-150.ckpt")
    (ckpt / "latest").write_text("step_100\n")  # a pointer the writer keeps wins
    assert _newest(bare, ckpt) == str(ckpt / "step_100")
    (ckpt / "latest").unlink()
    (ckpt / "LATEST").symlink_to(ckpt / "step_200")
    assert _newest(bare, ckpt) == str(ckpt / "step_200")


def test_the_recipe_gets_the_checkpoint_with_quotes_escaped(tmp_path, bare):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"restore_from:\n  path: '{anylaunch_job.PLACEHOLDER}'\n")
    proc = bare(
        "fill-recipe", str(recipe), "/ckpt/latest", env={"ANYLAUNCH_RESUME_FROM": "/c/it's"}
    )
    assert proc.returncode == 0, proc.stderr
    assert recipe.read_text() == "restore_from:\n  path: '/c/it''s'\n"
    recipe.write_text(f"restore_from:\n  path: '{anylaunch_job.PLACEHOLDER}'\n")
    assert bare("fill-recipe", str(recipe), "/ckpt/latest").returncode == 0
    assert recipe.read_text() == "restore_from:\n  path: '/ckpt/latest'\n"


STAGED_JOB = """
launcher: none
command: [python3, train.py]
inputs: {data: s3://bkt-a/train/}
outputs: {results: s3://bkt-a/out/}
checkpoint: {dir: /shared/ckpt}
"""


@pytest.mark.parametrize("backend", ["local", "slurm"])
def test_no_in_job_step_needs_anylaunch_in_the_job(cli_inproc, write, backend):
    result = cli_inproc(
        "run", str(write(STAGED_JOB)), "--backend", backend, "--dry-run", "--json", "--no-preflight"
    )
    assert result.rc == 0, result.err
    plan = result.json()["plan"]
    text = json.dumps(plan["payload"])
    assert "-m anylaunch" not in text and "anylaunch.storage" not in text
    assert f"-I -S {runtime.FILE_NAME}" not in text  # always a path to the shipped file
    assert "anylaunch_job.py" in text and "newest" in text and "stage" in text
    assert plan["files"][runtime.FILE_NAME] == runtime.source()


def _old_python(version: str) -> str:
    """An older interpreter (pyenv's, or pythonX.Y on PATH); skip when this machine has none."""
    found = sorted(Path("/root/.pyenv/versions").glob(f"{version}.*/bin/python3"))
    path = str(found[-1]) if found else shutil.which(f"python{version}")
    if not path:
        pytest.skip(f"no python{version} on this machine")
    return path


def test_python_3_8_stages_in_and_out_and_finds_checkpoints(
    tmp_path, s3client, bucket, s3env, runtime_file
):
    python = _old_python("3.8")
    env = {"PATH": "/usr/bin:/bin", **s3env, "ANYLAUNCH_STAGE_PART_MB": "5"}
    s3client.put_object(Bucket=bucket, Key="in/a.bin", Body=b"a" * 1000)
    manifest = _manifest(
        tmp_path,
        bucket,
        inputs=[{"path": "data", "uri": f"s3://{bucket}/in/"}],
        outputs=[{"path": "results", "uri": f"s3://{bucket}/out/"}],
    )

    def run(*args: str) -> subprocess.CompletedProcess:
        argv = [python, "-I", "-S", str(runtime_file), *args]
        return subprocess.run(argv, env=env, capture_output=True, text=True)

    assert run("stage", "in", str(manifest)).returncode == 0
    assert (tmp_path / "work" / "data" / "a.bin").read_bytes() == b"a" * 1000
    big = os.urandom(11 * MiB)  # three parts of 5 MiB
    (tmp_path / "work" / "results" / "big.bin").write_bytes(big)
    out = run("stage", "out", str(manifest))
    assert out.returncode == 0, out.stderr
    assert s3client.get_object(Bucket=bucket, Key="out/big.bin")["Body"].read() == big
    (tmp_path / "ckpt" / "step_7").mkdir(parents=True)
    (tmp_path / "ckpt" / "step_7" / ".done").write_text("")
    assert run("newest", str(tmp_path / "ckpt")).stdout.strip() == str(tmp_path / "ckpt" / "step_7")


def test_python_3_7_stops_with_one_line_naming_the_version(runtime_file, tmp_path):
    proc = subprocess.run(
        [_old_python("3.7"), "-I", "-S", str(runtime_file), "newest", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 127
    assert proc.stderr == (
        "anylaunch: python3 in this image is 3.7; anylaunch's in-job steps need 3.8 or newer\n"
    )
