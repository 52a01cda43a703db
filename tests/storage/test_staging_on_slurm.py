"""Staging on the devstack Slurm cluster: inputs through the shared cache before the tasks
start, outputs uploaded after — the same step as on the local backend."""

from __future__ import annotations

import sys

READER = (
    "import pathlib; files = sorted(p.name for p in pathlib.Path('data').iterdir());"
    " pathlib.Path('results').mkdir(exist_ok=True);"
    " pathlib.Path('results/seen.txt').write_text(','.join(files)); print('seen', files)"
)


def test_a_slurm_job_reads_s3_inputs_and_writes_outputs(
    cli_inproc, write, tmp_path, s3client, bucket, cli_env, devstack
):
    for name in ("a.bin", "b.bin"):
        s3client.put_object(Bucket=bucket, Key=f"train/{name}", Body=name.encode())
    work = tmp_path / "work"
    work.mkdir()
    path = write(
        f"""
        launcher: none
        command: [{sys.executable}, -c, "{READER}"]
        inputs: {{data: s3://{bucket}/train/}}
        outputs: {{results: s3://{bucket}/out/}}
        slurm: {{nodes: 1, python: {sys.executable}, workdir: {work}, cache_root: {tmp_path / "cache"}}}
        """
    )
    env = {**cli_env, "SLURM_CONF": devstack["SLURM_CONF"]}
    result = cli_inproc("run", str(path), "--json", env=env, timeout=180)
    assert result.rc == 0, result.out + result.err
    assert "seen ['a.bin', 'b.bin']" in cli_inproc("logs", result.json()["id"], env=env).out
    body = s3client.get_object(Bucket=bucket, Key="out/seen.txt")["Body"].read()
    assert body == b"a.bin,b.bin"
    assert (tmp_path / "cache" / bucket / "train" / "a.bin").read_bytes() == b"a.bin"
