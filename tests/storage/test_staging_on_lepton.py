"""Staging on the Lepton backend against the emulator: replicas stage inputs in from the
devstack S3 server, worker 0 uploads the outputs, in a bare image (python3 only)."""

from __future__ import annotations

READER = (
    "import os, pathlib; files = sorted(p.name for p in pathlib.Path('data').iterdir());"
    " print('node', os.environ['NODE_RANK'], 'seen', files);"
    " pathlib.Path('results').mkdir(exist_ok=True);"
    " pathlib.Path('results/seen.txt').write_text(','.join(files))"
)


def test_lepton_replicas_read_s3_inputs_and_worker_0_uploads(
    cli_inproc, write, tmp_path, s3client, bucket, cli_env, lepton_server
):
    for name in ("a.bin", "b.bin"):
        s3client.put_object(Bucket=bucket, Key=f"train/{name}", Body=name.encode())
    path = write(
        f"""
        image: python:3.11
        launcher: none
        nodes: 2
        command: [python3, -c, "{READER}"]
        inputs: {{data: s3://{bucket}/train/}}
        outputs: {{results: s3://{bucket}/out/}}
        lepton: {{}}
        """
    )
    # The S3 server is what a job reaches outside its own network, as on Lepton.
    outside = [cli_env["S3_ENDPOINT_URL"]]
    with lepton_server.open(state_dir=tmp_path / "emulator", seed=3, outside=outside) as emulator:
        env = {**cli_env, **emulator.env()}
        result = cli_inproc("run", str(path), "--json", env=env, timeout=180)
        assert result.rc == 0, result.out + result.err
        logs = cli_inproc("logs", result.json()["id"], env=env).out
    assert "node 0 seen ['a.bin', 'b.bin']" in logs and "node 1 seen ['a.bin', 'b.bin']" in logs
    assert s3client.get_object(Bucket=bucket, Key="out/seen.txt")["Body"].read() == b"a.bin,b.bin"
    assert cli_env["SECRET_KEY"] not in logs
