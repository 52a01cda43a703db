"""The local backend for real: torchrun agents rendezvous on 127.0.0.1 (CPU, gloo)."""

from __future__ import annotations

import os
import re
import sys
import threading
from pathlib import Path

import psutil

from helpers import job_processes, wait_until

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = Path(__file__).resolve().parent / "programs"


def test_demo_runs_four_ranks_on_two_nodes(cli, tmp_path, torch):
    result = cli(
        "run",
        str(ROOT / "examples" / "ddp_demo.yaml"),
        "--json",
        env={"CHECKPOINT_DIR": str(tmp_path / "ckpt")},
        timeout=300,
    )
    assert result.rc == 0, result.err
    job = result.json()
    assert job["state"] == "SUCCEEDED" and job["exit_code"] == 0
    logs = cli("logs", job["id"]).out
    ranks = set(
        re.findall(r"\[node (\d)\] rank=(\d) local_rank=\d node_rank=(\d) world_size=4", logs)
    )
    assert {(r, n) for _, r, n in ranks} == {("0", "0"), ("1", "0"), ("2", "1"), ("3", "1")}
    assert all(node == node_rank for node, _, node_rank in ranks)
    assert "step 20 loss" in logs and (tmp_path / "ckpt" / "latest.pt").exists()
    listed = cli("ps", "--json").json()
    assert [j["id"] for j in listed] == [job["id"]] and listed[0]["state"] == "SUCCEEDED"
    node1 = cli("logs", job["id"], "--node", "1", "--tail", "2").out
    assert len(node1.splitlines()) <= 2 and "[node" not in node1


def test_dry_run_shows_every_node_and_starts_nothing(cli_inproc, write, home):
    path = write(
        f"""
        command: python {PROGRAMS / "sleeper.py"}
        nodes: 2
        ranks_per_node: 2
        env:
          HF_TOKEN: ${{HF_TOKEN}}
        """
    )
    before = {p.pid for p in psutil.process_iter()}
    result = cli_inproc(
        "run", str(path), "--dry-run", "--json", env={"HF_TOKEN": "hf_planted_secret"}
    )
    assert result.rc == 0, result.err
    out = result.json()
    assert out["backend"] == "local"
    nodes = out["plan"]["payload"]["nodes"]
    assert [n["node_rank"] for n in nodes] == [0, 1]
    addrs = {(n["env"]["MASTER_ADDR"], n["env"]["MASTER_PORT"]) for n in nodes}
    assert len(addrs) == 1
    for n in nodes:
        # Each node's environment holds its rendezvous; the torchrun line reads it there.
        assert n["env"]["NODE_RANK"] == str(n["node_rank"]) and n["env"]["NNODES"] == "2"
        assert n["argv"][:2] == ["bash", "-c"]
        assert (
            '--nnodes "$NNODES" --nproc-per-node 2 --node-rank "$NODE_RANK"'
            ' --master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT"'
        ) in n["argv"][2]
    assert "hf_planted_secret" not in result.out and out["plan"]["secret_env"] == ["HF_TOKEN"]
    assert cli_inproc("ps", "--json").json() == []
    # Other tests and suites run jobs beside this one: only a process of this test's
    # store would be the dry-run's.
    new = [p for p in psutil.process_iter() if p.pid not in before and _ours(p)]
    assert not [p for p in new if "torch.distributed.run" in " ".join(_cmdline(p))]


def _ours(proc: psutil.Process) -> bool:
    try:
        return proc.environ().get("ANYLAUNCH_HOME") == os.environ["ANYLAUNCH_HOME"]
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False


def _cmdline(proc: psutil.Process) -> list[str]:
    try:
        return proc.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return []


def test_cancel_leaves_no_process_of_a_running_2x2_job(cli, cli_inproc, write, torch):
    path = write(f"command: python {PROGRAMS / 'sleeper.py'}\nnodes: 2\nranks_per_node: 2\n")
    job = cli("run", str(path), "--detach", "--json").json()
    wait_until(lambda: cli_inproc("logs", job["id"]).out.count("ready rank=") == 4, 120, "4 ranks")
    procs = job_processes(job["id"])
    assert len(procs) >= 7  # supervisor, 2 agents, 4 workers
    result = cli("cancel", job["id"], "--json")
    assert result.rc == 0 and result.json()["state"] == "CANCELLED"
    _, alive = psutil.wait_procs(procs, timeout=5)
    assert alive == []
    assert job_processes(job["id"]) == []
    assert cli("status", job["id"], "--json").json()["state"] == "CANCELLED"


def test_a_failing_rank_fails_the_job_and_stops_its_peers(cli, write, torch):
    path = write(
        f"""
        command: python {PROGRAMS / "fail_rank.py"}
        nodes: 2
        ranks_per_node: 2
        env: {{FAIL_RANK: 3}}
        local: {{kill_grace_s: 2}}
        """
    )
    result = cli("run", str(path), "--json", timeout=180)
    assert result.rc == 1
    job = result.json()
    assert job["state"] == "FAILED" and job["exit_code"] != 0
    assert "node 1" in job["detail"]
    assert job_processes(job["id"]) == []


def test_launcher_none_runs_once_per_node_with_the_tao_environment(cli, write):
    path = write(
        f"""
        command: [python, {PROGRAMS / "env_dump.py"}]
        launcher: none
        nodes: 3
        ranks_per_node: 4
        env: {{SPECIAL: "a b;$$(rm -rf /)'\\""}}
        """
    )
    result = cli("run", str(path), "--json")
    assert result.rc == 0, result.out + result.err
    logs = cli("logs", result.json()["id"]).out
    for rank in range(3):
        assert re.search(
            rf"\[node {rank}\] MASTER_ADDR=127\.0\.0\.1 MASTER_PORT=\d+ NNODES=3 NODE_RANK={rank}"
            rf" NUM_GPU_PER_NODE=4 WORLD_SIZE=3 SPECIAL=a b;\$\(rm -rf /\)'\"",
            logs,
        ), logs


def test_two_jobs_at_once_get_different_ports(cli, cli_inproc, write, torch):
    path = write(f"command: python {PROGRAMS / 'sleeper.py'}\nnodes: 2\n")
    jobs = [cli("run", str(path), "--detach", "--json").json() for _ in range(2)]
    try:
        for job in jobs:
            wait_until(
                lambda j=job: cli_inproc("logs", j["id"]).out.count("ready rank=") == 2,
                120,
                "both ranks",
            )
        ports = set()
        for job in jobs:
            assert cli("status", job["id"], "--json").json()["state"] == "RUNNING"
            ports |= set(re.findall(r"port=(\d+)", cli("logs", job["id"]).out))
        assert len(ports) == 2
    finally:
        cli("cancel", *[j["id"] for j in jobs])


def test_command_after_double_dash_and_config_placeholder(cli, write, tmp_path):
    path = write(
        """
        launcher: none
        model:
          name: tiny
        data:
          path: ${DATA:-/data}
        local:
          nproc_per_node: 1
        """
    )
    result = cli(
        "run",
        str(path),
        "--json",
        "--",
        sys.executable,
        "-c",
        "import sys, yaml; print(sorted(yaml.safe_load(open(sys.argv[1]))))",
        "{config}",
    )
    assert result.rc == 0, result.err
    logs = cli("logs", result.json()["id"]).out
    assert "['data', 'model']" in logs


def test_hooks_run_around_the_command_and_keep_its_status(cli, write, tmp_path):
    marker = tmp_path / "post-ran"
    path = write(
        f"""
        command: [python, -c, "import sys; sys.exit(5)"]
        launcher: none
        hooks:
          pre: echo pre-hook
          post: [touch {marker}]
        """
    )
    result = cli("run", str(path), "--json")
    assert result.rc == 1 and result.json()["exit_code"] == 5
    assert marker.exists() and "pre-hook" in cli("logs", result.json()["id"]).out


def test_ctrl_c_of_an_attached_run_cancels_the_job(home, write, spawns):
    import os
    import signal
    import subprocess

    path = write("launcher: none\nnodes: 2\ncommand: [bash, -c, 'echo started; exec sleep 600']\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "anylaunch", "run", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "ANYLAUNCH_HOME": str(home)},
    )
    assert proc.stdout.readline().endswith("started\n")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1 and "CANCELLED" in err
    job_id = re.search(r"job (\w{8}) CANCELLED", err).group(1)
    assert job_processes(job_id) == []


def test_logs_follow_prints_until_the_job_ends(cli, write):
    path = write(
        "launcher: none\ncommand: [bash, -c, 'for i in 1 2 3; do echo line $i; sleep 0.5; done']\n"
    )
    job = cli("run", str(path), "--detach", "--json").json()
    result = cli("logs", job["id"], "-f", timeout=30)
    assert result.rc == 0 and result.out == "line 1\nline 2\nline 3\n"
    assert cli("status", job["id"], "--json").json()["state"] == "SUCCEEDED"


def test_logs_of_a_node_the_job_does_not_have_is_a_usage_error(cli, write, torch):
    path = write("command: [python, -c, \"print('hello')\"]\nnodes: 2\nranks_per_node: 1\n")
    job = cli("run", str(path), "--json").json()
    for extra in ([], ["--follow"]):
        result = cli("logs", job["id"], "--node", "2", *extra)
        assert result.rc == 2, result.out + result.err
        assert "has nodes 0..1, not 2 — use --node 0..1" in result.err
    result = cli("logs", job["id"], "--node", "-1", "--json")
    assert result.rc == 2 and result.json()["error"]["code"] == "USAGE"
    assert "[node 1] hello" in cli("logs", job["id"]).out


def test_the_supervisor_adopts_the_nodes_the_submitting_process_started(
    cli, cli_inproc, write, home
):
    """`run` forks; the child starts the nodes and then becomes the supervisor by exec.
    The recorded supervisor is the nodes' parent and runs as the supervisor module (how
    a submit cut short finds it), and the detached `run` ended with its output closed
    although the supervisor, once its child, goes on."""
    path = write(
        "launcher: none\nnodes: 2\ncommand: [bash, -c, 'echo ready $NODE_RANK; exec sleep 600']\n"
    )
    job = cli("run", str(path), "--detach", "--json").json()
    try:
        wait_until(lambda: cli_inproc("logs", job["id"]).out.count("ready") == 2, 120, "both nodes")
        supervisor = psutil.Process(int(job["native_id"]))
        assert supervisor.cmdline()[-3:] == [
            "-m",
            "anylaunch.backends.local.supervisor",
            str(home / "jobs" / job["id"]),
        ]
        nodes = [p for p in job_processes(job["id"]) if p.ppid() == supervisor.pid]
        assert sorted(p.environ()["NODE_RANK"] for p in nodes) == ["0", "1"]
        assert "ANYLAUNCH_SUPERVISOR_NODES" not in nodes[0].environ()
    finally:
        assert cli("cancel", job["id"], "--json").json()["state"] == "CANCELLED"
    assert job_processes(job["id"]) == []


def test_a_submitter_running_threads_starts_a_job_that_runs_to_its_end(home, tmp_path, spawns):
    """A process with other threads cannot fork safely (the dashboard, a user's program
    calling the API): its supervisor starts as a fresh interpreter, with the same result."""
    from anylaunch import api
    from anylaunch.state import State
    from anylaunch.store import Store

    job_file = tmp_path / "job.yaml"
    job_file.write_text("launcher: none\nnodes: 2\ncommand: [bash, -c, 'echo node $NODE_RANK']\n")
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        job = api.submit(api.load(str(job_file)), "local", check=False)
    finally:
        stop.set()
        other.join()
    assert job.wait(timeout=120) is State.SUCCEEDED
    assert sorted(job.logs().splitlines()) == ["[node 0] node 0", "[node 1] node 1"]
    assert Store(home).get(job.id).exit_code == 0


def test_a_node_whose_exit_status_is_lost_ends_the_job_unknown_never_succeeded(cli, home):
    """The supervisor adopts a node it cannot wait for (not its child: its status is
    somebody else's to collect). It does not guess: the job ends UNKNOWN with the reason,
    and `run`'s exit status would not be 0."""
    import json
    import os
    import subprocess

    from anylaunch.state import State
    from anylaunch.store import JobRecord, Store

    store = Store()
    job_dir = store.jobs_dir("lost0001")
    (job_dir / "logs").mkdir(parents=True)
    node = {"node_rank": 0, "argv": ["false"], "env": {}, "log": str(job_dir / "logs/node-0.log")}
    plan = {"job_id": "lost0001", "payload": {"workdir": str(job_dir), "nodes": [node]}}
    (job_dir / "plan.json").write_text(json.dumps(plan))
    store.add(
        JobRecord(
            id="lost0001", name="lost", backend="local", state=State.PENDING, job_dir=str(job_dir)
        )
    )
    not_its_child = os.getpid()
    supervisor = subprocess.run(
        [sys.executable, "-m", "anylaunch.backends.local.supervisor", str(job_dir)],
        env={**os.environ, "ANYLAUNCH_SUPERVISOR_NODES": str(not_its_child)},
        timeout=60,
        check=False,
    )
    assert supervisor.returncode == 1
    result = json.loads((job_dir / "result.json").read_text())
    assert (result["state"], result["exit_code"]) == ("UNKNOWN", None)
    status = cli("status", "lost0001", "--json").json()
    assert (status["state"], status["exit_code"]) == ("UNKNOWN", None)
    assert "node 0's exit status was taken by another process" in status["detail"]


def test_the_dry_run_is_the_plan_that_is_sent(cli, write, home):
    from helpers import assert_dry_run_is_the_plan_sent

    path = write(
        "name: same\nnodes: 2\nranks_per_node: 2\ncommand: python -c 'import time; time.sleep(60)'\n"
        "env: {HF_TOKEN: '${HF_TOKEN}', LR: '0.1'}\ncheckpoint: {dir: ckpt}\n"
    )
    job_id = assert_dry_run_is_the_plan_sent(cli, home, path, env={"HF_TOKEN": "hf_x"})
    assert cli("cancel", job_id, "--json").json()["state"] == "CANCELLED"


# A rank that aborts (SIGABRT) in Python's teardown after its program ended with 0: torch's
# gloo group does so at exit now and then. The abort is the teardown's, not the work's.
def _teardown_abort_job(write, **env: str) -> Path:
    variables = ", ".join(f"{k}: {v!r}" for k, v in env.items())
    return write(
        f"command: python {PROGRAMS / 'teardown_abort.py'} --lr 0.1\nnodes: 2\nranks_per_node: 1\n"
        f"env: {{{variables}}}\nlocal: {{kill_grace_s: 2}}\n"
    )


def test_a_rank_aborting_in_teardown_after_its_work_ended_well_does_not_fail_the_job(
    cli, write, torch
):
    result = cli("run", str(_teardown_abort_job(write, ABORT_WHEN="teardown")), timeout=180)
    assert result.rc == 0, result.out + result.err
    assert "argv=['--lr', '0.1'] main=__main__" in result.out
    assert result.out.count("aborted (SIGABRT) in Python's teardown") == 2


def test_a_rank_aborting_in_its_work_or_after_failing_or_in_its_own_exit_handler_fails(
    cli, write, torch
):
    for env in ({"ABORT_WHEN": "work"}, {"EXIT_STATUS": "3"}, {"ABORT_WHEN": "handler"}):
        result = cli("run", str(_teardown_abort_job(write, **env)), "--json", timeout=180)
        assert result.rc == 1, env
        assert result.json()["state"] == "FAILED", env
        assert "in Python's teardown" not in cli("logs", result.json()["id"]).out, env
