"""A four-step workflow across backends on the devstack: prepare (local) → train (2 nodes
on the Slurm cluster, its checkpoint written to the shared cache) → eval ×4 splits (the
Lepton emulator, reading the checkpoint through S3) → export (local). Split 2 of eval
fails once; `retry --failed` reruns only that split, and then export."""

from __future__ import annotations

import sys

from tests.lepton.lepton_helpers import MOUNT, NODE_GROUP, volume_dir

PREPARE = "import pathlib; pathlib.Path('data').mkdir(exist_ok=True); pathlib.Path('data/rows.txt').write_text('r1,r2,r3')"
TRAIN = (
    "import os, pathlib; rank = os.environ['NODE_RANK']; print('train on node', rank, 'of',"
    " os.environ['NNODES'], 'read', pathlib.Path('data/rows.txt').read_text());"
    " rank == '0' and pathlib.Path('ckpt').mkdir(exist_ok=True) is None and"
    " pathlib.Path('ckpt/model.txt').write_text('weights:' + pathlib.Path('data/rows.txt').read_text())"
)
EVAL = (
    "import os, pathlib, sys; split = os.environ['SPLIT_ID'];"
    f" mark = pathlib.Path('{MOUNT}/failed-once-' + split);"
    " model = pathlib.Path('ckpt/model.txt').read_text(); print('eval', split, model);"
    " (split == '2' and not mark.exists()) and (mark.touch() or sys.exit(7));"
    " pathlib.Path('scores').mkdir(exist_ok=True); pathlib.Path('scores/score-' + split).write_text(model)"
)
MAKE = (
    "import pathlib; pathlib.Path('out').mkdir(exist_ok=True);"
    " pathlib.Path('out/a.txt').write_text('A' * 100000)"
)
EXPORT = (
    "import pathlib; names = sorted(p.name for p in pathlib.Path('scores').iterdir());"
    " pathlib.Path('final').mkdir(exist_ok=True); pathlib.Path('final/summary.txt').write_text(','.join(names))"
)


def test_four_steps_across_local_slurm_and_lepton_succeed_after_retrying_one_split(
    cli, write, tmp_path, s3client, bucket, cli_env, devstack, lepton_server
):
    work, cluster_work = tmp_path / "work", tmp_path / "cluster-work"
    work.mkdir()
    cluster_work.mkdir()
    cache = tmp_path / "cache"  # the cluster's shared filesystem
    path = write(
        f"""
        name: acceptance
        launcher: none
        slurm: {{python: {sys.executable}, workdir: {cluster_work}, cache_root: {cache}}}
        lepton: {{resource_shape: cpu.small, dedicated_node_group: {NODE_GROUP}}}
        steps:
          prepare:
            backend: local
            command: [{sys.executable}, -c, "{PREPARE}"]
            outputs: {{data: s3://{bucket}/wf/data/}}
          train:
            backend: slurm
            nodes: 2
            command: [{sys.executable}, -c, "{TRAIN}"]
            inputs: {{data: "${{steps.prepare.outputs.data}}"}}
            outputs: {{ckpt: s3://{bucket}/wf/ckpt/}}
          eval:
            backend: lepton
            image: python:3.11
            splits: 4
            command: [python3, -c, "{EVAL}"]
            inputs: {{ckpt: "${{steps.train.outputs.ckpt}}"}}
            outputs: {{scores: s3://{bucket}/wf/scores/}}
          export:
            backend: local
            command: [{sys.executable}, -c, "{EXPORT}"]
            inputs: {{scores: "${{steps.eval.outputs.scores}}"}}
            outputs: {{final: s3://{bucket}/wf/final/}}
        """,
        "wf.yaml",
    )
    outside = [cli_env["S3_ENDPOINT_URL"]]  # the S3 server: a job reaches it, as on Lepton
    with lepton_server.open(state_dir=tmp_path / "emulator", seed=5, outside=outside) as emulator:
        volume_dir(emulator, MOUNT).mkdir(parents=True, exist_ok=True)
        env = {
            **cli_env,
            **emulator.env(),
            "SLURM_CONF": devstack["SLURM_CONF"],
            "ANYLAUNCH_WORKFLOW_POLL_S": "0.5",
        }
        plan = cli("run", str(path), "--dry-run", "--json", env=env).json()
        via = {(s["id"], h["input"]): h["via"] for s in plan["steps"] for h in s["handoffs"]}
        assert via == {("train", "data"): "s3", ("eval", "ckpt"): "s3", ("export", "scores"): "s3"}
        assert plan["order"] == ["prepare", "train", "eval", "export"]

        first = cli("run", str(path), "--json", env=env, timeout=600, cwd=work)
        assert first.rc == 1, first.out + first.err
        wf = first.json()
        steps = {s["id"]: s for s in wf["steps"]}
        assert {k: s["state"] for k, s in steps.items()} == {
            "prepare": "SUCCEEDED",
            "train": "SUCCEEDED",
            "eval": "FAILED",
            "export": "BLOCKED",
        }
        assert [s["state"] for s in steps["eval"]["splits"]] == [
            "SUCCEEDED",
            "SUCCEEDED",
            "FAILED",
            "SUCCEEDED",
        ]
        train_job = steps["train"]["splits"][0]["attempts"][0]["id"]
        train_log = cli("logs", train_job, env=env).out
        assert "train on node 0 of 2" in train_log and "train on node 1 of 2" in train_log
        # The checkpoint went to the cluster's shared cache first, then to S3.
        assert (cache / bucket / "wf" / "ckpt" / "model.txt").read_text() == "weights:r1,r2,r3"
        eval_log = cli("logs", steps["eval"]["splits"][0]["attempts"][0]["id"], env=env).out
        assert "eval 0 weights:r1,r2,r3" in eval_log  # read through S3 on Lepton
        # Downloaded from S3 (once: the splits share the Lepton volume's cache).
        eval_logs = [
            cli("logs", split["attempts"][0]["id"], env=env).out
            for split in steps["eval"]["splits"]
        ]
        assert sum("in: objects=1, fetched=1," in text for text in eval_logs) == 1

        again = cli("retry", wf["id"], "--failed", "--json", env=env, timeout=600, cwd=work)
        assert again.rc == 0, again.out + again.err
        done = again.json()
        assert done["state"] == "SUCCEEDED"
        attempts = {
            s["id"]: [len(split["attempts"]) for split in s["splits"]] for s in done["steps"]
        }
        assert attempts == {"prepare": [1], "train": [1], "eval": [1, 1, 2, 1], "export": [1]}
        created = len(emulator.world.jobs)
    assert created == 5  # four splits, and split 2 once more
    summary = s3client.get_object(Bucket=bucket, Key="wf/final/summary.txt")["Body"].read()
    assert summary == b"score-0,score-1,score-2,score-3"


def test_steps_on_one_cluster_hand_off_through_the_shared_cache_without_a_download(
    cli, write, tmp_path, bucket, cli_env, devstack
):
    work = tmp_path / "cluster-work"
    work.mkdir()
    path = write(
        f"""
        launcher: none
        slurm: {{python: {sys.executable}, workdir: {work}, cache_root: {tmp_path / "cache"}}}
        steps:
          make:
            command: [{sys.executable}, -c, "{MAKE}"]
            outputs: {{out: s3://{bucket}/x/out/}}
          use:
            command: [{sys.executable}, -c, "print('read', open('inp/a.txt').read()[:5])"]
            inputs: {{inp: "${{steps.make.outputs.out}}"}}
        """,
        "wf.yaml",
    )
    env = {**cli_env, "SLURM_CONF": devstack["SLURM_CONF"]}
    plan = cli("run", str(path), "--dry-run", "--json", env=env).json()
    [handoff] = plan["steps"][1]["handoffs"]
    assert (handoff["via"], handoff["filesystem"]) == ("shared", f"slurm {tmp_path / 'cache'}")
    done = cli("run", str(path), "--json", env=env, timeout=300)
    assert done.rc == 0, done.out + done.err
    user = done.json()["steps"][1]["splits"][0]["attempts"][0]["id"]
    log = cli("logs", user, env=env).out
    assert "read AAAAA" in log
    assert "in: objects=1, fetched=0, bytes_fetched=0," in log  # read in place


def test_a_step_whose_input_an_earlier_step_never_wrote_fails_with_the_reason(
    cli, write, tmp_path, bucket, cli_env
):
    path = write(
        f"""
        launcher: none
        steps:
          make:
            command: [bash, -c, "echo forgot to write out/"]
            outputs: {{out: s3://{bucket}/never/}}
          use:
            command: [bash, -c, "echo unreachable"]
            inputs: {{inp: "${{steps.make.outputs.out}}"}}
        """,
        "wf.yaml",
    )
    env = {**cli_env, "ANYLAUNCH_WORKFLOW_POLL_S": "0.3"}
    done = cli("run", str(path), "--json", env=env, cwd=tmp_path)
    assert done.rc == 1, done.out + done.err
    make, use = done.json()["steps"]
    assert make["state"] == "SUCCEEDED"
    assert use["state"] == "FAILED" and use["splits"] == []  # refused before any job
    assert f"s3://{bucket}/never/" in use["error"] and "\n" not in use["error"]
