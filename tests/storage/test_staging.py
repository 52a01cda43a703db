"""Staging on a real S3-compatible server (moto on 127.0.0.1), through local jobs."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

MiB = 1024 * 1024
# The program: count the input's files and hash them, write one output file.
READER = (
    "import hashlib, os, pathlib, sys; root = pathlib.Path('data');"
    " files = sorted(p for p in root.rglob('*') if p.is_file());"
    " h = hashlib.sha256(b''.join(p.read_bytes() for p in files)).hexdigest();"
    " pathlib.Path('results').mkdir(exist_ok=True);"
    " pathlib.Path('results/summary.txt').write_text(f'{len(files)} {h}');"
    " print('files', len(files), h)"
)


def put_many(client, bucket: str, prefix: str, count: int, size: int) -> dict[str, bytes]:
    blobs = {f"{prefix}{i:03d}.bin": os.urandom(size) for i in range(count)}
    with ThreadPoolExecutor(16) as pool:
        list(
            pool.map(
                lambda kv: client.put_object(Bucket=bucket, Key=kv[0], Body=kv[1]), blobs.items()
            )
        )
    return blobs


def job_file(write, bucket: str, workdir: Path, cache: Path) -> Path:
    return write(
        f"""
        launcher: none
        command: [{sys.executable}, -c, "{READER}"]
        inputs:
          data: s3://{bucket}/train/
        outputs:
          results: s3://{bucket}/out/
        local:
          workdir: {workdir}
          cache_root: {cache}
        """
    )


def staged(home: Path, job_id: str, direction: str = "in") -> dict:
    return json.loads((home / "jobs" / job_id / "staging" / f"stage-{direction}.json").read_text())


def test_inputs_go_through_the_cache_and_only_changed_objects_are_refetched(
    cli, write, home, tmp_path, s3client, bucket, cli_env
):
    blobs = put_many(s3client, bucket, "train/", 200, MiB)
    path = job_file(write, bucket, tmp_path / "work", tmp_path / "cache")
    (tmp_path / "work").mkdir()
    expected = hashlib.sha256(b"".join(blobs[k] for k in sorted(blobs))).hexdigest()

    first = cli("run", str(path), "--json", env=cli_env)
    assert first.rc == 0, first.out + first.err
    job = first.json()
    assert f"files 200 {expected}" in cli("logs", job["id"]).out
    cold = staged(home, job["id"])
    assert (cold["fetched"], cold["bytes_fetched"]) == (200, 200 * MiB)
    assert (tmp_path / "cache" / bucket / "train" / "007.bin").read_bytes() == blobs[
        "train/007.bin"
    ]

    second = cli("run", str(path), "--json", env=cli_env).json()
    warm = staged(home, second["id"])
    assert (warm["objects"], warm["fetched"], warm["bytes_fetched"]) == (200, 0, 0)

    s3client.put_object(Bucket=bucket, Key="train/042.bin", Body=b"changed")
    third = cli("run", str(path), "--json", env=cli_env).json()
    refreshed = staged(home, third["id"])
    assert (refreshed["fetched"], refreshed["refreshed"]) == (1, ["train/042.bin"])
    blobs["train/042.bin"] = b"changed"
    expected = hashlib.sha256(b"".join(blobs[k] for k in sorted(blobs))).hexdigest()
    assert f"files 200 {expected}" in cli("logs", third["id"]).out

    s3client.delete_object(Bucket=bucket, Key="train/000.bin")
    fourth = cli("run", str(path), "--json", env=cli_env).json()
    assert staged(home, fourth["id"])["removed"] == 1
    assert "files 199 " in cli("logs", fourth["id"]).out


def test_outputs_land_in_the_bucket_and_no_secret_is_stored(
    cli, write, home, tmp_path, s3client, bucket, cli_env
):
    put_many(s3client, bucket, "train/", 3, 1024)
    (tmp_path / "work").mkdir()
    path = job_file(write, bucket, tmp_path / "work", tmp_path / "cache")
    result = cli("run", str(path), "--json", env=cli_env)
    assert result.rc == 0, result.out + result.err
    body = s3client.get_object(Bucket=bucket, Key="out/summary.txt")["Body"].read().decode()
    assert body.startswith("3 ")
    # The output was written on the shared filesystem first and recorded there.
    assert (tmp_path / "cache" / bucket / "out" / "summary.txt").read_text() == body
    secret = cli_env["SECRET_KEY"]
    job_dir = home / "jobs" / result.json()["id"]
    for file in job_dir.rglob("*"):
        if file.is_file():
            assert secret not in file.read_text(errors="replace"), file
    db = sqlite3.connect(home / "jobs.db")
    for table in ("jobs", "events"):
        for row in db.execute(f"SELECT * FROM {table}"):
            assert secret not in json.dumps(row), table


def test_job_sees_s3_settings_and_tao_cloud_metadata_but_the_plan_does_not(
    cli, write, tmp_path, bucket, s3client, cli_env
):
    s3client.put_object(Bucket=bucket, Key="x.json", Body=b"{}")
    probe = (
        "import json, os; m = json.loads(os.environ['CLOUD_METADATA']);"
        " c = m['aws'][os.environ['BUCKET']];"
        " print('meta', c['access_key'] == os.environ['ACCESS_KEY'], c['endpoint_url'] == os.environ['S3_ENDPOINT_URL'])"
    )
    path = write(
        f"""
        launcher: none
        command: [{sys.executable}, -c, "{probe}"]
        env: {{BUCKET: {bucket}}}
        inputs: {{x.json: s3://{bucket}/x.json}}
        local: {{workdir: {tmp_path}}}
        """
    )
    dry = cli("run", str(path), "--dry-run", "--json", env=cli_env)
    assert cli_env["SECRET_KEY"] not in dry.out
    assert {"ACCESS_KEY", "SECRET_KEY", "CLOUD_METADATA"} <= set(dry.json()["plan"]["secret_env"])
    result = cli("run", str(path), "--json", env=cli_env)
    assert result.rc == 0, result.err
    assert "meta True True" in cli("logs", result.json()["id"]).out


def test_bad_scheme_and_unreadable_path_are_exit_2_before_submit(
    cli_inproc, write, bucket, cli_env
):
    scheme = cli_inproc(
        "run", str(write("command: a\ninputs: {/d: lepton://b/p}\n", "a.yaml")), env=cli_env
    )
    assert (
        scheme.rc == 2
        and "a.yaml:2: inputs./d.uri: 'lepton://b/p' uses the lepton:// scheme" in scheme.err
    )
    missing = write(
        f"launcher: none\ncommand: [true]\ninputs: {{/d: s3://{bucket}/nope/}}\n", "b.yaml"
    )
    result = cli_inproc("run", str(missing), env=cli_env)
    assert result.rc == 2 and "Traceback" not in result.err
    assert f"s3://{bucket}/nope/ is not readable (no such object or prefix)" in result.err
    assert cli_inproc("ps", "--json").json() == []


def test_an_archive_is_unpacked_once_per_version(cli, write, tmp_path, s3client, bucket, cli_env):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "a.txt").write_text("alpha")
    with tarfile.open(tmp_path / "d.tgz", "w:gz") as tar:
        tar.add(src / "sub", arcname="sub")
    s3client.upload_file(str(tmp_path / "d.tgz"), bucket, "pack/d.tgz")
    path = write(
        f"""
        launcher: none
        command: [cat, data/sub/a.txt]
        inputs:
          data: {{uri: s3://{bucket}/pack/d.tgz, unpack: true}}
        local: {{workdir: {tmp_path}, cache_root: {tmp_path / "cache"}}}
        """
    )
    result = cli("run", str(path), "--json", env=cli_env)
    assert result.rc == 0, result.err
    assert "\nalpha" in cli("logs", result.json()["id"]).out


def test_concurrent_stage_ins_of_one_input_fetch_each_object_once(
    tmp_path, s3client, bucket, bare_s3
):
    put_many(s3client, bucket, "shared/", 40, 256 * 1024)
    manifests = []
    for name in ("a", "b", "c"):
        work = tmp_path / name
        work.mkdir()
        manifest = {
            "workdir": str(work),
            "state_dir": str(work / "state"),
            "cache_root": str(tmp_path / "cache"),
            "inputs": [{"path": "data", "uri": f"s3://{bucket}/shared/"}],
        }
        (work / "m.json").write_text(json.dumps(manifest))
        manifests.append(work)
    procs = [
        subprocess.Popen(bare_s3.argv("stage", "in", str(w / "m.json")), env=bare_s3.env())
        for w in manifests
    ]
    assert [p.wait(120) for p in procs] == [0, 0, 0]
    fetched = [
        json.loads((w / "state" / "stage-in.json").read_text())["fetched"] for w in manifests
    ]
    assert sum(fetched) == 40
    assert all(len(list((w / "data").iterdir())) == 40 for w in manifests)
    assert not list((tmp_path / "cache").rglob("*.part"))


def test_an_interrupted_upload_resumes_with_the_parts_already_sent(
    tmp_path, s3client, bucket, bare_s3
):
    out = tmp_path / "results"
    out.mkdir()
    (out / "big.bin").write_bytes(os.urandom(12 * 5 * MiB))  # 12 parts of 5 MiB
    manifest = tmp_path / "m.json"
    manifest.write_text(
        json.dumps(
            {
                "workdir": str(tmp_path),
                "state_dir": str(tmp_path / "state"),
                "outputs": [{"path": "results", "uri": f"s3://{bucket}/run1/"}],
            }
        )
    )
    env = bare_s3.env({"ANYLAUNCH_STAGE_PART_MB": "5", "ANYLAUNCH_STAGE_CONCURRENCY": "1"})
    argv = bare_s3.argv("stage", "out", str(manifest))
    proc = subprocess.Popen(argv, env=env)
    deadline = time.monotonic() + 60
    parts = 0
    while time.monotonic() < deadline and parts < 3:
        uploads = s3client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
        if uploads:
            listed = s3client.list_parts(
                Bucket=bucket, Key="run1/big.bin", UploadId=uploads[0]["UploadId"]
            )
            parts = len(listed.get("Parts", []))
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert 3 <= parts < 12, "the upload finished before it could be interrupted"
    assert subprocess.run(argv, env=env).returncode == 0
    summary = json.loads((tmp_path / "state" / "stage-out.json").read_text())
    assert summary["parts_resumed"] >= 3 and summary["parts_resumed"] + summary["parts_sent"] == 12
    body = s3client.get_object(Bucket=bucket, Key="run1/big.bin")["Body"].read()
    assert body == (out / "big.bin").read_bytes()
    # A third run finds the file uploaded and unchanged: nothing is sent.
    assert subprocess.run(argv, env=env).returncode == 0
    again = json.loads((tmp_path / "state" / "stage-out.json").read_text())
    assert (again["skipped"], again["uploaded"]) == (1, 0)


def test_a_link_out_of_the_outputs_is_not_uploaded(tmp_path, s3client, bucket, bare_s3):
    out = tmp_path / "results"
    out.mkdir()
    (out / "ok.txt").write_text("fine")
    (tmp_path / "private.key").write_text("do-not-upload")
    (out / "sneaky").symlink_to(tmp_path / "private.key")
    manifest = tmp_path / "m.json"
    manifest.write_text(
        json.dumps(
            {
                "workdir": str(tmp_path),
                "state_dir": str(tmp_path / "state"),
                "outputs": [{"path": "results", "uri": f"s3://{bucket}/run/"}],
            }
        )
    )
    proc = bare_s3("stage", "out", str(manifest))
    assert proc.returncode == 1 and "a link out of the output directory" in proc.stderr
    assert s3client.list_objects_v2(Bucket=bucket, Prefix="run/").get("KeyCount", 0) == 0


def test_outputs_outside_the_working_directory_are_refused(cli_inproc, write):
    for path in ("/etc/passwd", "../../x"):
        job = write(f"launcher: none\ncommand: [true]\noutputs: {{{path}: s3://b-k/x/}}\n")
        result = cli_inproc("run", str(job), "--dry-run")
        assert result.rc == 2 and "outputs" in result.err and "Traceback" not in result.err


def _manifest(tmp_path: Path, name: str, outputs: list[dict], **more) -> Path:
    manifest = tmp_path / name
    manifest.write_text(
        json.dumps(
            {"workdir": str(tmp_path), "state_dir": str(tmp_path / f"{name}-state"),
             "outputs": outputs, **more}
        )
    )  # fmt: skip
    return manifest


def test_an_output_folder_replaced_by_a_link_uploads_nothing(tmp_path, s3client, bucket, bare_s3):
    """The program may replace its output folder by a link to any folder it can read:
    every file there would be 'inside' the link's target."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "id_ed25519").write_text("do-not-upload")
    (tmp_path / "results").symlink_to(elsewhere)
    (tmp_path / "single.txt").symlink_to(elsewhere / "id_ed25519")
    for path, uri in (("results", f"s3://{bucket}/run/"), ("single.txt", f"s3://{bucket}/one")):
        manifest = _manifest(tmp_path, f"m-{path}.json", [{"path": path, "uri": uri}])
        proc = bare_s3("stage", "out", str(manifest))
        assert proc.returncode == 1 and "not uploaded" in proc.stderr, proc.stderr
    assert s3client.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0


def test_a_hard_link_to_a_file_outside_the_outputs_uploads_nothing(
    tmp_path, s3client, bucket, bare_s3
):
    out = tmp_path / "results"
    out.mkdir()
    secret = tmp_path / "private.key"
    secret.write_text("do-not-upload")
    os.link(secret, out / "copy")
    (out / "a.txt").write_text("mine")
    os.link(out / "a.txt", out / "b.txt")  # both names inside: an ordinary output
    manifest = _manifest(tmp_path, "m.json", [{"path": "results", "uri": f"s3://{bucket}/run/"}])
    proc = bare_s3("stage", "out", str(manifest))
    assert proc.returncode == 1 and "hard link" in proc.stderr, proc.stderr
    assert s3client.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0
    os.unlink(out / "copy")
    assert bare_s3("stage", "out", str(manifest)).returncode == 0
    listed = s3client.list_objects_v2(Bucket=bucket, Prefix="run/")["Contents"]
    assert sorted(o["Key"] for o in listed) == ["run/a.txt", "run/b.txt"]


def test_a_second_job_in_the_folder_writes_and_uploads_its_own_outputs(
    tmp_path, s3client, bucket, bare_s3
):
    """Stage-in links an output into the shared cache at its URI's place; the next job
    in the same folder, with another URI, must not inherit the first one's link."""
    cache = str(tmp_path / "cache")
    outputs = [[{"path": "results", "uri": f"s3://{bucket}/job{n}/"}] for n in (1, 2)]
    first = _manifest(tmp_path, "m1.json", outputs[0], cache_root=cache)
    second = _manifest(tmp_path, "m2.json", outputs[1], cache_root=cache)
    assert bare_s3("stage", "in", str(first)).returncode == 0
    (tmp_path / "results" / "first.txt").write_text("job one")
    assert bare_s3("stage", "out", str(first)).returncode == 0
    assert bare_s3("stage", "in", str(second)).returncode == 0
    (tmp_path / "results" / "second.txt").write_text("job two")
    assert bare_s3("stage", "out", str(second)).returncode == 0
    listed = s3client.list_objects_v2(Bucket=bucket)["Contents"]
    assert sorted(o["Key"] for o in listed) == ["job1/first.txt", "job2/second.txt"]
