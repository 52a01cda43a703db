"""The Slurm backend against the real devstack cluster: slurmctld, slurmd n1 and n2, slurmdbd.

The time-limit job takes over two minutes of wall time (Slurm counts limits in minutes), so
it is submitted when this module starts and checked by the session's last test (moved there
by tests/slurm/conftest.py), while the rest of the suite runs.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from anylaunch import api
from anylaunch.backends.slurm import commands, preflight
from anylaunch.backends.slurm.backend import SlurmBackend
from anylaunch.jobfile import loader
from anylaunch.launch import splits
from anylaunch.launch.resolve import resolve
from anylaunch.state import State
from anylaunch.store import JobRecord, Store
from helpers import job_processes, wait_until

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = Path(__file__).resolve().parent / "programs"
PY = sys.executable


@pytest.fixture(scope="module", autouse=True)
def slurm_conf(devstack):
    """In-process API calls talk to the devstack cluster."""
    before = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = devstack["SLURM_CONF"]
    yield devstack["SLURM_CONF"]
    if before is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = before


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def job_file(write, body: str, name: str = "job.yaml") -> Path:
    """A job file for the cluster: our interpreter, a port of its own (nodes share one host)."""
    return write(body.replace("PORT", str(free_port())).replace("PY", PY), name)


def load(path: Path, env: dict[str, str] | None = None):
    return loader.load(path, environ={**os.environ, **(env or {})})


@contextmanager
def _on_the_cluster(devstack: dict[str, str]) -> Iterator[None]:
    """SLURM_CONF for in-process calls outside this module's own fixture (a session's)."""
    before = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = devstack["SLURM_CONF"]
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = before


@pytest.fixture(scope="session")
def timeout_job(devstack, tmp_path_factory):
    """A job that outlives its 2-minute limit, started as early as possible and kept for
    the session (its test runs last).

    Slurm sends `--signal` at its 30 s check once `now + lead + 30 >= end`: with 1 minute
    and any lead that could be the first check after the start, before the program has
    installed its handler. With 2 minutes and a 30 s lead it comes 60-90 s in.
    """
    home = tmp_path_factory.mktemp("timeout")
    path = home / "job.yaml"
    path.write_text(
        f"name: overtime\ncommand: {PY} {PROGRAMS / 'usr1_until_killed.py'}\nlauncher: none\n"
        'slurm:\n  time: "00:02:00"\n  signal_lead: 30\n'
    )
    store = Store(home / "store")
    with _on_the_cluster(devstack):
        job = api.submit(load(path), "slurm", store=store)
    yield job
    with _on_the_cluster(devstack):
        if not job.status().terminal:
            job.cancel()


@pytest.fixture(autouse=True)
def _start_timeout_job_first(timeout_job):
    """Every test here requests the time-limit job, so it starts with the first of them."""


def test_two_node_torchrun_job_runs_four_ranks_on_two_slurm_nodes(
    cli_inproc, write, tmp_path, torch
):
    path = job_file(
        write,
        f"""
        name: ddp-on-slurm
        command: python {ROOT / "examples" / "ddp_demo.py"} --steps 3 --checkpoint-dir {tmp_path / "ckpt"}
        nodes: 2
        ranks_per_node: 2
        env:
          OMP_NUM_THREADS: 1
        slurm:
          python: PY
          master_port: PORT
          time: "00:10:00"
        """,
    )
    result = cli_inproc("run", str(path), "--json", timeout=240)
    assert result.rc == 0, result.out + result.err
    job = result.json()
    assert (job["state"], job["exit_code"], job["backend"]) == ("SUCCEEDED", 0, "slurm")
    logs = cli_inproc("logs", job["id"]).out
    nodes = dict(re.findall(r"\[node (\d)\] anylaunch: task \d, node \d of 2 on (n\d)", logs))
    assert nodes == {"0": "n1", "1": "n2"}, logs
    ranks = re.findall(r"\[node (\d)\] rank=(\d) local_rank=\d node_rank=(\d) world_size=4", logs)
    assert sorted((r, n) for n, r, _ in ranks) == [("0", "0"), ("1", "0"), ("2", "1"), ("3", "1")]
    assert all(node == node_rank for node, _, node_rank in ranks)
    assert "step 3 loss" in logs
    node1 = cli_inproc("logs", job["id"], "--node", "1").out
    assert "[node" not in node1
    assert {line.split()[0] for line in node1.splitlines() if line.startswith("rank=")} == {
        "rank=2",
        "rank=3",
    }


def test_a_job_whose_program_handles_no_early_signal_ends_when_the_program_ends(
    cli_inproc, write, home
):
    # The early signal arrives at Slurm's first check (a lead as long as the limit), while
    # the program runs; no rank handles it, so the step passing it on looks until the
    # limit. The job must end with its program, not hold its nodes until the limit.
    path = job_file(
        write,
        f"""
        name: no-handler
        launcher: none
        command: [PY, {PROGRAMS / "ends_after_the_early_signal.py"}]
        slurm:
          time: "00:10:00"
          signal_lead: 600
        """,
    )
    job = cli_inproc("run", str(path), "--detach", "--json").json()
    handle = api.get(job["id"], store=Store(home))
    try:
        state = handle.wait(timeout=180)
    finally:
        commands.run(["scancel", job["native_id"]], check=False)
    logs = handle.logs()
    assert state is State.SUCCEEDED, logs
    assert "work done, with no handler for the early signal" in logs
    assert "went to none: the program ended before a rank here handled it" in logs


def test_srun_launcher_runs_one_slurm_task_per_rank(cli_inproc, write, tmp_path, torch):
    path = job_file(
        write,
        f"""
        name: ddp-srun
        command: python {ROOT / "examples" / "ddp_demo.py"} --steps 2 --checkpoint-dir {tmp_path / "ckpt"}
        launcher: srun
        env:
          OMP_NUM_THREADS: 1
        slurm:
          nodes: 2
          ntasks_per_node: 2
          python: PY
          master_port: PORT
        """,
    )
    result = cli_inproc("run", str(path), "--json", timeout=240)
    assert result.rc == 0, result.out + result.err
    logs = cli_inproc("logs", result.json()["id"]).out
    tasks = set(
        re.findall(r"anylaunch: task (\d), node (\d) of 2 on (n\d) \(launcher: srun\)", logs)
    )
    assert tasks == {("0", "0", "n1"), ("1", "0", "n1"), ("2", "1", "n2"), ("3", "1", "n2")}
    ranks = re.findall(r"rank=(\d) local_rank=(\d) node_rank=(\d) world_size=4", logs)
    assert sorted(ranks) == [("0", "0", "0"), ("1", "1", "0"), ("2", "0", "1"), ("3", "1", "1")]


def test_job_exiting_3_ends_failed_with_exit_code_3(cli_inproc, write):
    path = write("name: three\ncommand: bash -c 'echo bye; exit 3'\nlauncher: none\n")
    result = cli_inproc("run", str(path), "--backend", "slurm", "--json", timeout=120)
    job = result.json()
    assert result.rc == 1 and (job["state"], job["exit_code"]) == ("FAILED", 3)
    # Accounting (sacct, used once slurmctld forgets the job) agrees with squeue, once
    # slurmctld has told slurmdbd: that message is sent after the job ends, not with it.
    row = wait_until(
        lambda: (
            (r := commands.sacct([job["native_id"]])[job["native_id"]]).state != "PENDING" and r
        ),
        60,
        "the job's end in accounting",
    )
    assert (row.state, row.exit_code) == ("FAILED", 3)


def test_cancelled_job_ends_cancelled_and_stops_its_processes(cli_inproc, write, home):
    path = write("name: sleepy\ncommand: sleep 300\nlauncher: none\nslurm: {}\n")
    job = cli_inproc("run", str(path), "--detach", "--json").json()
    handle = api.get(job["id"], store=Store(home))
    _wait_for(lambda: handle.status() is State.RUNNING and job_processes(job["id"]), 60, "start")
    result = cli_inproc("cancel", job["id"], "--json")
    assert result.rc == 0, result.err
    assert result.json()["state"] == "CANCELLED"
    row = commands.squeue([job["native_id"]])[job["native_id"]]
    assert row.state == "CANCELLED"
    assert job_processes(job["id"]) == []


def test_the_dry_run_is_the_script_that_is_sent(cli, write, home):
    from helpers import assert_dry_run_is_the_plan_sent

    path = write(
        "name: same\ncommand: python train.py --lr 0.1\nnodes: 2\ngpus_per_node: 1\n"
        "env: {HF_TOKEN: '${HF_TOKEN}'}\ncheckpoint: {dir: /tmp/ckpt}\n"
        "slurm: {time: '00:05:00'}\n"
    )
    job_id = assert_dry_run_is_the_plan_sent(cli, home, path, env={"HF_TOKEN": "hf_x"})
    assert cli("cancel", job_id, "--json").json()["state"] == "CANCELLED"


def test_secrets_reach_the_job_but_no_file_under_its_directory(cli_inproc, write, home):
    token, key = "hf_planted_8f3a1c", "wandb_planted_77d2e9"
    path = write(
        f"""
        name: secretive
        command: python {PROGRAMS / "show_args.py"}
        launcher: none
        env:
          HF_TOKEN: ${{HF_TOKEN}}
        slurm:
          python: {PY}
          env_vars:
            WANDB_API_KEY: ${{WANDB_API_KEY}}
        """
    )
    result = cli_inproc("run", str(path), "--json", env={"HF_TOKEN": token, "WANDB_API_KEY": key})
    assert result.rc == 0, result.out + result.err
    job = result.json()
    logs = cli_inproc("logs", job["id"]).out
    assert f"hf_token_sha256={hashlib.sha256(token.encode()).hexdigest()}" in logs
    assert f"wandb_key_sha256={hashlib.sha256(key.encode()).hexdigest()}" in logs
    files = [p for p in home.rglob("*") if p.is_file()]
    assert any(p.name == "sbatch.sh" for p in files) and any(p.name == "jobs.db" for p in files)
    for file in files:  # the job's directory, and the store beside it
        data = file.read_bytes()
        assert token.encode() not in data and key.encode() not in data, file


def test_hostile_job_name_and_argument_run_literally(cli_inproc, write, tmp_path):
    canary = tmp_path / "canary"
    hostile = f"x'; touch {canary} #"
    path = write(
        f"""
        command: ["{PY}", "{PROGRAMS / "show_args.py"}", "{hostile}", "$HOME", "a b"]
        launcher: none
        slurm:
          job_name: "{hostile}"
        """
    )
    result = cli_inproc("run", str(path), "--json")
    assert result.rc == 0, result.out + result.err
    logs = cli_inproc("logs", result.json()["id"]).out
    assert f"arg<{hostile}>" in logs and "arg<$HOME>" in logs and "arg<a b>" in logs
    assert f"job_name={hostile}" in logs
    assert not canary.exists()


def test_splits_go_out_as_one_array_and_map_back_per_split(write, home):
    path = write(
        "name: sp\ncommand: bash -c 'echo split=$SPLIT_ID; exit $SPLIT_ID'\nlauncher: none\nslurm: {}\n"
    )
    store = Store(home)
    before = commands.CALLS["sbatch"]
    run = splits.launch(resolve(load(path)), 3, store=store)
    assert commands.CALLS["sbatch"] - before == 1
    natives = [job.record.native_id for job in run.jobs]
    base = natives[0].split("_")[0]
    assert natives == [f"{base}_0", f"{base}_1", f"{base}_2"]
    deadline = time.monotonic() + 90
    while not all(state.terminal for state in run.states().values()):
        assert time.monotonic() < deadline
        time.sleep(0.5)
    records = {r.split_id: r for r in store.list(run_id=run.id)}
    assert {i: (r.state, r.exit_code) for i, r in records.items()} == {
        0: (State.SUCCEEDED, 0),
        1: (State.FAILED, 1),
        2: (State.FAILED, 2),
    }
    for job in run.jobs:
        assert f"split={job.record.split_id}" in job.logs()


def test_missing_mount_source_on_a_node_fails_naming_the_node(cli_inproc, write):
    path = write(
        "command: 'true'\nlauncher: none\nslurm:\n  nodes: 2\n  extra_mounts: [/no/such/dir:/data]\n"
    )
    result = cli_inproc("run", str(path), "--json", timeout=120)
    job = result.json()
    assert (job["state"], job["exit_code"]) == ("FAILED", 97)
    logs = cli_inproc("logs", job["id"]).out
    assert "mount source /no/such/dir is missing on node n1" in logs


def test_master_port_in_use_fails_fast_with_the_fix(cli_inproc, write):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        path = write(f"command: 'true'\nslurm:\n  master_port: {port}\n")
        result = cli_inproc("run", str(path), "--json", timeout=120)
    job = result.json()
    assert (job["state"], job["exit_code"]) == ("FAILED", 98)
    # Either node may run it (the other may be busy): both are on this host.
    logs = cli_inproc("logs", job["id"]).out
    node = re.search(r"node 0 of 1 on (n\d)", logs)
    assert node and f"MASTER_PORT {port} is already in use on {node[1]}" in logs, logs


def test_preflight_checks_mounts_and_port_on_the_nodes(write):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        path = write(
            f"command: t\nslurm:\n  nodes: 2\n  master_port: {port}\n  extra_mounts: [/tmp, /no/such]\n"
        )
        checks = preflight.cluster_checks(load(path))
    found = {(c.name, c.status, c.message) for c in checks}
    assert ("mounts", "fail", "mount source /no/such is missing on node n1") in found
    assert ("mounts", "fail", "mount source /no/such is missing on node n2") in found
    assert ("master_port", "warn", f"port {port} is in use on n1, n2") in found


def test_status_of_50_jobs_costs_one_squeue_and_at_most_one_sacct(write, home):
    # Held jobs stay pending: 50 real jobs in slurmctld at no CPU cost.
    path = write("command: 'true'\nlauncher: none\nslurm:\n  sbatch_lines: [--hold]\n")
    store = Store(home)
    spec = load(path)
    jobs = [api.submit(spec, "slurm", store=store) for _ in range(49)]
    # One job slurmctld no longer knows (as after MinJobAge): only sacct can answer.
    forgotten = JobRecord(id="forgotten", name="old", backend="slurm", state=State.RUNNING,
                          job_dir=str(home / "old"), native_id="999999")  # fmt: skip
    store.add(forgotten)
    try:
        before = commands.CALLS.copy()
        records = api.jobs(store=store, limit=None)
        calls = commands.CALLS - before
        assert len(records) == 50
        assert {r.state for r in records if r.id != "forgotten"} == {State.PENDING}
        assert calls == Counter({"squeue": 1, "sacct": 1}), calls
    finally:
        commands.run(["scancel", *(job.record.native_id for job in jobs)])


def test_time_limit_kill_ends_timeout_after_an_early_signal(timeout_job):
    state = timeout_job.wait(timeout=240)
    assert state is State.TIMEOUT
    logs = timeout_job.logs()
    assert "DUE TO TIME LIMIT" in logs
    warned = re.search(r"got USR1 (\d+)s before the deadline", logs)
    assert warned and 20 <= int(warned.group(1)) <= 65, logs  # lead 30 s; Slurm may be early
    deadline = re.search(r"waiting; deadline in (\d+)s", logs)
    assert deadline and 110 <= int(deadline.group(1)) <= 120


def test_requeued_job_is_not_finished(write, home):
    path = write("command: bash -c 'echo run; sleep 300'\nlauncher: none\nslurm: {}\n")
    job = api.submit(load(path), "slurm", store=Store(home))
    native = job.record.native_id
    try:
        _wait_for(lambda: job.status() is State.RUNNING, 60, "the first run")
        commands.run(["scontrol", "requeue", native])
        # Back in the queue (Slurm delays its restart by minutes): not finished.
        _wait_for(lambda: commands.squeue([native])[native].state == "PENDING", 30, "requeue")
        assert job.status() is State.RUNNING  # states never move back; nor to a final one
        assert SlurmBackend().poll([job.record])[job.id].state is State.PENDING
    finally:
        assert job.cancel() is State.CANCELLED


def test_logs_follow_prints_lines_as_the_job_writes_them(cli_inproc, write):
    path = write("command: bash -c 'echo first; sleep 3; echo second'\nlauncher: none\nslurm: {}\n")
    job = cli_inproc("run", str(path), "--detach", "--json").json()
    proc = subprocess.Popen(
        [PY, "-m", "anylaunch", "logs", job["id"], "-f"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "ANYLAUNCH_HOME": str(Path(job["job_dir"]).parents[1])},
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    while "anylaunch: task" in first:
        first = proc.stdout.readline()
    assert first == "first\n"
    assert proc.poll() is None  # still following: the job has not written "second" yet
    rest, _ = proc.communicate(timeout=60)
    assert rest.endswith("second\n") and proc.returncode == 0


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)
