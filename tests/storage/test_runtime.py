"""The in-job runtime: python3's standard library is all it needs, and it speaks S3 as
S3 expects (checked against AWS's published signing example, botocore's signer, and the
devstack S3 server), run the way a job runs it: `python3 -I -S anylaunch_job.pyz`."""

from __future__ import annotations

import ast
import datetime
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from importlib import resources
from pathlib import Path

import pytest
from tests.storage.conftest import bare_python

from anylaunch.node import runtime
from anylaunch.node.runtime import checkpoint, s3, stage

MiB = 1024 * 1024
SRC = Path(__file__).resolve().parents[2] / "src"


def shipped() -> dict[str, bytes]:
    """Name -> bytes of every entry of the zipapp."""
    with zipfile.ZipFile(io.BytesIO(runtime.zipapp())) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_the_zipapp_holds_every_in_job_module_and_its_entry():
    folder = resources.files("anylaunch.node.runtime")
    modules = sorted(p.name for p in folder.iterdir() if p.name.endswith(".py"))
    assert len(modules) >= 6  # the check would prove nothing on an empty folder
    expected = {f"{runtime.PACKAGE}/{name}" for name in modules} | {"__main__.py"}
    assert set(shipped()) == expected
    for name in modules:  # the submit side's __init__ stays behind: an empty one instead
        inside = shipped()[f"{runtime.PACKAGE}/{name}"]
        assert inside == (b"" if name == "__init__.py" else folder.joinpath(name).read_bytes())


def test_the_same_code_is_the_same_bytes():
    first = runtime.zipapp()
    for cached in (runtime.zipapp, runtime.digest, runtime.packed):
        cached.cache_clear()
    assert runtime.zipapp() == first and runtime.zipapp() is not first
    with zipfile.ZipFile(io.BytesIO(first)) as archive:
        infos = archive.infolist()
    assert [i.filename for i in infos] == ["__main__.py", *sorted(i.filename for i in infos[1:])]
    assert {(i.date_time, i.external_attr, i.compress_type) for i in infos} == {
        ((1980, 1, 1, 0, 0, 0), 0o100644 << 16, zipfile.ZIP_STORED)
    }
    assert runtime.unpacked(runtime.packed()) == first


def test_what_a_script_carries_is_less_than_half_the_source_text():
    """Compressed once for the journey: a Lepton command and a Slurm script grow by far
    less than the runtime's own text (a zip of base64 text would not)."""
    source = sum(len(data) for data in shipped().values())
    carried = len(runtime.write_shell('"/tmp/anylaunch/anylaunch_job.pyz"', "img", "resume"))
    assert carried < source / 2, (carried, source)


def test_the_runtime_imports_nothing_outside_the_standard_library():
    siblings = {name.rsplit("/", 1)[-1][:-3] for name in shipped()}
    names = set()
    for name, source in shipped().items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level:
                assert node.level == 1 and node.module in siblings, (name, node.module)
            elif isinstance(node, ast.ImportFrom):
                names.add((node.module or "").split(".")[0])
    names -= {"__future__", runtime.PACKAGE}
    assert {"http", "hashlib", "os"} <= names  # the check would prove nothing without them
    assert names <= set(sys.stdlib_module_names), names - set(sys.stdlib_module_names)


def test_every_shipped_module_parses_as_python_3_8():
    for name, source in shipped().items():
        ast.parse(source, filename=name, feature_version=(3, 8))


def test_under_a_bare_interpreter_only_standard_modules_load(runtime_file, tmp_path):
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        " import anylaunch_runtime.main, anylaunch_runtime.stage;"
        " anylaunch_runtime.checkpoint.newest_checkpoint(sys.argv[2]);"
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
    assert "http" in loaded and "hashlib" in loaded and runtime.PACKAGE in loaded
    assert loaded - {runtime.PACKAGE} <= set(sys.stdlib_module_names) | {"__main__"}, loaded


def test_nothing_from_anylaunch_or_the_venv_reaches_the_zipapp(runtime_file, tmp_path):
    """Even with anylaunch's sources and this venv named in the environment, the bare
    interpreter under -I -S sees neither: what runs is the zipapp's own code."""
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); import anylaunch_runtime.stage as m;"
        " print(m.__file__);"
        " import importlib.util as u; print(u.find_spec('anylaunch'), u.find_spec('boto3'))"
    )
    proc = subprocess.run(
        [bare_python(), "-I", "-S", "-c", probe, str(runtime_file)],
        env={
            "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
            "PYTHONPATH": f"{SRC}:{':'.join(sys.path)}",
            "VIRTUAL_ENV": sys.prefix,
        },
        capture_output=True,
        text=True,
        check=True,
    )
    where, found = proc.stdout.splitlines()
    assert where == f"{runtime_file}/{runtime.PACKAGE}/stage.py"
    assert found == "None None"


def test_signatures_match_awss_published_example():
    """AWS's SigV4 example for S3 (GET /test.txt with a Range, 2013-05-24)."""
    creds = s3.Credentials(
        "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "", "us-east-1", ""
    )
    headers = s3.Client(creds)._sign(
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

    creds = s3.Credentials("AKIDEXAMPLE", "secret/key+x", "tok", "eu-west-3", "")
    ours = s3.Client(creds)._sign(
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

    client = s3.Client(s3.Credentials.from_env(s3env))
    warm = stage.stage_in(json.loads(manifest.read_text()), client)
    assert (warm.fetched, client.calls) == (0, {"ListObjectsV2": 1})


def test_a_range_is_pinned_to_the_etag_that_was_listed(s3client, bucket, s3env):
    s3client.put_object(Bucket=bucket, Key="obj", Body=b"version one")
    client = s3.Client(s3.Credentials.from_env(s3env))
    etag, size = client.head_object(bucket, "obj")
    s3client.put_object(Bucket=bucket, Key="obj", Body=b"version two")
    got: list[bytes] = []
    with pytest.raises(s3.S3Error) as caught:
        client.get_range(bucket, "obj", etag, 0, size - 1, size, lambda c: got.append(bytes(c)))
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
        '"/tmp/x/anylaunch_job.pyz"', "nvcr.io/nvidia/cuda:12.4.0-base", "stage-in"
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


def test_the_command_carries_the_runtime_byte_for_byte(tmp_path, spawns):
    target = tmp_path / "deep" / runtime.FILE_NAME
    script = runtime.write_shell(f'"{target}"', "img", "resume")
    path = f"{Path(bare_python()).parent}:/usr/bin:/bin"
    proc = subprocess.run(["bash", "-c", script], env={"PATH": path})
    assert proc.returncode == 0 and target.read_bytes() == runtime.zipapp()
    assert [p.name for p in target.parent.iterdir()] == [runtime.FILE_NAME]  # no .part left
    (tmp_path / "ckpt" / "step_3").mkdir(parents=True)
    (tmp_path / "ckpt" / "step_3" / "DONE").write_text("")
    ran = subprocess.run(
        [bare_python(), "-I", "-S", str(target), "newest", str(tmp_path / "ckpt")],
        env={"PATH": path},
        capture_output=True,
        text=True,
    )
    assert ran.stdout == f"{tmp_path / 'ckpt' / 'step_3'}\n"


def test_a_runtime_damaged_on_the_way_is_refused_with_one_line(tmp_path):
    target = tmp_path / runtime.FILE_NAME
    lines = runtime.write_shell(f'"{target}"', "img", "resume").splitlines()
    middle = len(lines) // 2  # a line of the packed zipapp: change one character
    lines[middle] = ("B" if lines[middle][0] == "A" else "A") + lines[middle][1:]
    proc = subprocess.run(
        ["bash", "-c", "\n".join([*lines, "echo not reached"])],
        env={"PATH": f"{Path(bare_python()).parent}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1 and "not reached" not in proc.stdout
    assert proc.stderr == (
        "anylaunch: the in-job runtime arrived damaged (its SHA-256 differs);"
        " submit the job again\n"
    )
    assert list(tmp_path.iterdir()) == []


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
    recipe.write_text(f"restore_from:\n  path: '{checkpoint.PLACEHOLDER}'\n")
    proc = bare(
        "fill-recipe", str(recipe), "/ckpt/latest", env={"ANYLAUNCH_RESUME_FROM": "/c/it's"}
    )
    assert proc.returncode == 0, proc.stderr
    assert recipe.read_text() == "restore_from:\n  path: '/c/it''s'\n"
    recipe.write_text(f"restore_from:\n  path: '{checkpoint.PLACEHOLDER}'\n")
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
    assert runtime.FILE_NAME in text and "newest" in text and "stage" in text
    assert runtime.FILE_NAME not in plan["files"]  # not text: it is never among them
    if backend == "local":  # written into the job's directory by submit
        assert runtime.unpacked(plan["payload"]["runtime"]) == runtime.zipapp()
    else:  # written by the batch script before the first step that needs it
        script = plan["payload"]["script"]
        carried = runtime.write_shell('"$ANYLAUNCH_JOB_DIR/anylaunch_job.pyz"', None, "resume")
        assert script.index(carried) < script.index(" newest ") < script.index(" stage in ")


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
