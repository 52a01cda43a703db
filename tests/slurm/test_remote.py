"""Slurm on a cluster reached over ssh: the devstack's login node, from a submitting side
that has no Slurm configuration at all (SLURM_CONF unset, so nothing here can reach the
controller except through the login node).

The devstack writes the login node's alias into the ssh configuration (DEVSTACK_SLURM_LOGIN);
the jobs run there as the login node's own user, in its home. What the tests do on the
cluster side (a go file, a look at squeue) they do through ssh too.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import signal
import stat
import subprocess
import sys
import threading
import urllib.request
import uuid
from pathlib import Path

import pytest

from anylaunch import api
from anylaunch.backends.slurm import remote
from anylaunch.backends.slurm.login import Login
from anylaunch.observe import live
from anylaunch.state import State
from anylaunch.store import Store
from helpers import free_port_pair, wait_until

PY = sys.executable
REAL_SSH = "/usr/bin/ssh"


class Cluster:
    """The login node, and a scratch folder of this test on the cluster's filesystem."""

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self.login = Login.parse(alias)
        self.home = self.sh("printenv HOME").strip()
        self.scratch = f"{self.home}/anylaunch-tests/{uuid.uuid4().hex[:12]}"
        self.sh(f"mkdir -p {self.scratch}")

    def sh(self, command: str) -> str:
        """A command run on the login node as its user, over a connection of its own."""
        done = subprocess.run(
            [REAL_SSH, "-o", "BatchMode=yes", "-o", "ControlPath=none", self.alias, command],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def jobs_with_comment(self, job_id: str) -> list[str]:
        """Every Slurm job (array tasks as one) whose comment names anylaunch job `job_id`."""
        out = self.sh("squeue -h --states=all -o '%F|%k'")
        return sorted({line.split("|")[0] for line in out.split() if line.endswith(f":{job_id}")})


@pytest.fixture
def cluster(devstack, monkeypatch, home):
    alias = devstack.get("DEVSTACK_SLURM_LOGIN")
    if not alias:
        pytest.skip("the devstack has no login node (scripts/devstack up)")
    # The submitting side knows no cluster: only the login node does.
    monkeypatch.delenv("SLURM_CONF", raising=False)
    found = Cluster(alias)
    yield found
    # Whatever the test left queued or running is cancelled; its folders removed.
    store = Store(home)
    natives = [j.native_id.split("_")[0] for j in store.list(limit=None) if j.native_id]
    ids = [j.id for j in store.list(limit=None)]
    if natives:
        found.sh("scancel " + " ".join(sorted(set(natives))))
    dirs = " ".join(f"~/.anylaunch/jobs/{i}" for i in ids)
    found.sh(f"rm -rf {found.scratch} {dirs}")
    store.close()
    found.login.close()


def project(tmp_path: Path, files: dict[str, str]) -> Path:
    """A git repository with `files` committed: the folder a user submits from."""
    folder = tmp_path / "project"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    git = ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    return folder


def submitted(done) -> str:
    """The id of a job `run --detach --json` sent; a refusal (preflight) says why."""
    assert done.rc == 0 and done.json().get("id"), done.out + done.err
    return done.json()["id"]


def job(folder: Path, body: str, alias: str, *, slurm: str = "") -> Path:
    """A job file in `folder` whose `slurm:` section names the login node (and `slurm`)."""
    path = folder / "job.yaml"
    extra = "".join(f"  {line}\n" for line in slurm.splitlines())
    path.write_text(f"{body.rstrip()}\nslurm:\n  login: {alias}\n{extra}")
    return path


def test_a_two_node_job_succeeds_and_its_logs_come_back(cli, cluster, tmp_path):
    folder = project(tmp_path, {"hello.py": "import os; print('rank', os.environ['NODE_RANK'])\n"})
    path = job(
        folder,
        "name: two\nlauncher: none\nnodes: 2\n"
        "command: 'echo on $SLURMD_NODENAME master $MASTER_ADDR; python3 hello.py'",
        cluster.alias,
    )
    done = cli("run", str(path), "--json", cwd=folder, timeout=240)
    assert done.rc == 0, done.err
    summary = done.json()
    assert summary["state"] == "SUCCEEDED" and summary["exit_code"] == 0
    for node in (0, 1):
        logs = cli("logs", summary["id"], "--node", str(node), cwd=folder)
        assert f"rank {node}" in logs.out, logs.out
        assert "master n1" in logs.out
    # The logs came back into the job's folder here; the job ran in the cluster's.
    local = Path(summary["job_dir"]) / "logs" / "node-1.log"
    assert "rank 1" in local.read_text()
    assert "rank 1" in cluster.sh(f"cat ~/.anylaunch/jobs/{summary['id']}/logs/node-1.log")


def test_an_edit_after_submit_does_not_change_what_the_job_reads(cli, cluster, tmp_path, home):
    folder = project(tmp_path, {"data.txt": "as submitted\n", "sub/deep.txt": "deep one\n"})
    go = f"{cluster.scratch}/go"
    path = job(
        folder,
        "launcher: none\n"
        f"command: [bash, -c, 'until [ -f {go} ]; do sleep 0.2; done; cat data.txt sub/deep.txt']",
        cluster.alias,
    )
    done = cli("run", str(path), "--detach", "--json", cwd=folder, timeout=120)
    assert done.rc == 0, done.err
    job_id = done.json()["id"]
    (folder / "data.txt").write_text("edited after submit\n")
    (folder / "sub" / "deep.txt").unlink()
    cluster.sh(f"touch {go}")
    assert api.get(job_id, store=Store(home)).wait(timeout=120) is State.SUCCEEDED
    logs = cli("logs", job_id, cwd=folder).out
    assert "as submitted" in logs and "deep one" in logs
    assert "edited" not in logs
    source = cli("status", job_id, "--json").json()["source"]
    assert source["snapshot"]["files"] == 3  # data.txt, sub/deep.txt, job.yaml
    assert source["snapshot"]["sha256"].startswith("sha256:")


def test_status_names_the_commit_of_a_dirty_tree(cli, cluster, tmp_path):
    folder = project(tmp_path, {"train.py": "print('v1')\n"})
    commit = subprocess.run(
        ["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    (folder / "train.py").write_text("print('v2, not committed')\n")
    path = job(folder, "launcher: none\ncommand: [python3, train.py]", cluster.alias)
    done = cli("run", str(path), "--json", cwd=folder, timeout=120)
    assert done.rc == 0, done.err
    source = cli("status", done.json()["id"], "--json").json()["source"]
    assert source["commit"] == commit and source["branch"] == "main"
    assert source["dirty"] is True
    assert source["repo"] == str(folder)
    assert "v2, not committed" in cli("logs", done.json()["id"]).out
    plain = cli("status", done.json()["id"]).out
    assert f"main@{commit[:12]}" in plain and "dirty" in plain


def test_cancel_ends_a_running_job_and_squeue_lets_it_go(cli, cluster, tmp_path, home):
    folder = project(tmp_path, {"x": "x\n"})
    path = job(folder, "launcher: none\ncommand: [sleep, '300']", cluster.alias)
    job_id = submitted(cli("run", str(path), "--detach", "--json", cwd=folder))
    handle = api.get(job_id, store=Store(home))
    wait_until(lambda: handle.status() is State.RUNNING, timeout=60, what="the job to run")
    native = handle.record.native_id
    done = cli("cancel", job_id, "--json")
    assert done.rc == 0, done.err
    assert done.json()["state"] == "CANCELLED"
    wait_until(lambda: not cluster.sh(f"squeue -h -j {native}").strip(), timeout=30, what="squeue")


def test_a_three_split_array_runs_as_one_array_job(cli, cluster, tmp_path):
    folder = project(tmp_path, {"x": "x\n"})
    path = job(
        folder,
        "launcher: none\nsplits: [en, de, fr]\n"
        "command: [bash, -c, 'echo split $SPLIT_ID is $SPLIT_VALUE']",
        cluster.alias,
    )
    done = cli("run", str(path), "--json", cwd=folder, timeout=240)
    assert done.rc == 0, done.err
    view = done.json()
    assert view["state"] == "SUCCEEDED"
    attempts = [s["attempts"][-1] for s in view["splits"]]
    bases = {a["native_id"].split("_")[0] for a in attempts}
    assert len(bases) == 1  # one sbatch --array
    for index, (value, attempt) in enumerate(zip(["en", "de", "fr"], attempts, strict=True)):
        assert f"split {index} is {value}" in cli("logs", attempt["id"]).out


def test_a_two_step_afterok_chain_runs_in_order(cli, cluster, tmp_path):
    folder = project(tmp_path, {"x": "x\n"})
    mark = f"{cluster.scratch}/order"
    path = folder / "wf.yaml"
    path.write_text(
        "launcher: none\n"
        f"slurm: {{login: {cluster.alias}}}\n"
        "steps:\n"
        "  first:\n"
        f"    command: [bash, -c, 'sleep 2; echo first >> {mark}']\n"
        "  second:\n"
        "    needs: [first]\n"
        f"    command: [bash, -c, 'echo second >> {mark}']\n"
    )
    done = cli("run", str(path), "--json", cwd=folder, timeout=240)
    assert done.rc == 0, done.err
    summary = done.json()
    assert summary["mode"] == "slurm"  # handed to Slurm whole: no controller
    assert {s["id"]: s["state"] for s in summary["steps"]} == {
        "first": "SUCCEEDED",
        "second": "SUCCEEDED",
    }
    assert cluster.sh(f"cat {mark}").split() == ["first", "second"]


def test_secrets_reach_the_job_through_no_file_and_no_command_line(cli, cluster, tmp_path, home):
    secret = f"s3cr3t-{uuid.uuid4().hex}"
    folder = project(tmp_path, {"x": "x\n"})
    path = job(
        folder,
        "launcher: none\nenv:\n  HF_TOKEN: ${HF_TOKEN}\n"
        "command: [bash, -c, 'printf %s \"$HF_TOKEN\" | sha256sum']",
        cluster.alias,
    )
    seen: list[str] = []
    stop = threading.Event()

    def watch_command_lines() -> None:
        while not stop.is_set():
            for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
                try:
                    if secret.encode() in cmdline.read_bytes():
                        seen.append(str(cmdline))
                except OSError:
                    continue

    watcher = threading.Thread(target=watch_command_lines, daemon=True)
    watcher.start()
    try:
        done = cli("run", str(path), "--json", cwd=folder, env={"HF_TOKEN": secret}, timeout=120)
    finally:
        stop.set()
        watcher.join()
    assert done.rc == 0, done.err
    assert seen == []
    digest = hashlib.sha256(secret.encode()).hexdigest()
    assert digest in cli("logs", done.json()["id"]).out  # it reached the job
    job_root = f"{cluster.home}/.anylaunch/jobs/{done.json()['id']}"
    for where in (home, Path(job_root), Path("/tmp") / f"anylaunch-ssh-{os.getuid()}"):
        for file in where.rglob("*"):
            if file.is_file() and not file.is_socket():
                assert secret.encode() not in file.read_bytes(), file


def test_ps_of_a_hundred_remote_jobs_is_one_round_trip(cli, cluster, tmp_path, home):
    log = tmp_path / "ssh-calls.log"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "ssh"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\nexec {REAL_SSH} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    folder = project(tmp_path, {"x": "x\n"})
    path = job(
        folder,
        "launcher: none\nsplits: 100\ncommand: [sleep, '600']",
        cluster.alias,
        slurm="sbatch_lines: [--hold]",  # held: queued, using no node
    )
    done = cli("run", str(path), "--detach", "--json", cwd=folder, env=env, timeout=240)
    assert done.rc == 0, done.err
    log.write_text("")
    listed = cli("ps", "--all", "--json", env=env)
    assert listed.rc == 0, listed.err
    jobs = listed.json()
    assert len(jobs) == 100 and {j["state"] for j in jobs} == {"PENDING"}
    calls = [line for line in log.read_text().splitlines() if line]
    # the connection was open: one command, one round trip
    assert len(calls) == 1, [call[-300:] for call in calls]
    assert "squeue" in calls[0]


def test_a_connection_killed_during_sbatch_leaves_exactly_one_job(cli, cluster, tmp_path, home):
    """The ssh call that runs sbatch loses its connection while the command runs on the
    cluster: the job is UNKNOWN, then found by its comment and adopted, never sent again."""
    cut, started = tmp_path / "cut", tmp_path / "started"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "ssh"
    # For sbatch only: run the real command in the background, say so, and when the test
    # has cut the connection, end as ssh does when it loses one.
    wrapper.write_text(
        "#!/bin/bash\n"
        'case "$*" in *sbatch\\ --parsable*) ;; *) exec ' + REAL_SSH + ' "$@" ;; esac\n'
        f'{REAL_SSH} "$@" >/dev/null 2>&1 & pid=$!\n'
        f"touch {started}\n"
        f"while [ ! -f {cut} ]; do sleep 0.05; done\n"
        'kill -9 "$pid" 2>/dev/null\n'
        'echo "Connection to $1 closed by remote host." >&2\n'
        "exit 255\n"
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    folder = project(tmp_path, {"x": "x\n"})
    out = f"{cluster.scratch}/ran"
    path = job(folder, f"launcher: none\ncommand: [bash, -c, 'echo once >> {out}']", cluster.alias)
    run = subprocess.Popen(
        [PY, "-m", "anylaunch", "run", str(path), "--detach", "--json"],
        cwd=folder,
        env={**os.environ, "ANYLAUNCH_HOME": str(home), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until(started.exists, timeout=60, what="sbatch to start on the cluster")
    store = Store(home)
    job_id = wait_until(lambda: [j.id for j in store.list(limit=None)], what="the record")[0]
    wait_until(lambda: cluster.jobs_with_comment(job_id), timeout=60, what="the queued job")
    # Cut the shared connection itself, then the command's.
    master = subprocess.run(
        [REAL_SSH, "-o", f"ControlPath={cluster.login.socket}", "-O", "check", cluster.alias],
        capture_output=True,
        text=True,
    ).stderr
    os.kill(int(re.search(r"pid=(\d+)", master).group(1)), signal.SIGKILL)  # type: ignore[union-attr]
    cut.touch()
    stdout, stderr = run.communicate(timeout=120)
    assert run.returncode == 0, stderr
    assert json.loads(stdout)["state"] == "UNKNOWN"
    handle = api.get(job_id, store=store)
    assert handle.wait(timeout=120) is State.SUCCEEDED  # found by its comment, adopted
    assert len(cluster.jobs_with_comment(job_id)) == 1
    assert cluster.sh(f"cat {out}").split() == ["once"]
    assert "UNKNOWN" in [e["state"] for e in store.events(job_id)]


def test_the_folder_goes_over_as_a_tar_stream_without_rsync(cluster, tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ssh").symlink_to(REAL_SSH)  # ssh and nothing else: no rsync here
    monkeypatch.setenv("PATH", str(bin_dir))
    local = tmp_path / "job"
    (local / "snapshot" / "pkg").mkdir(parents=True)
    (local / "snapshot" / "pkg" / "a b.py").write_text("print('spaces')\n")
    (local / "snapshot" / "run.sh").write_text("#!/bin/sh\n")
    (local / "snapshot" / "run.sh").chmod(0o755)
    (local / "snapshot" / "link").symlink_to("pkg")
    where = f"{cluster.scratch}/pushed dir"
    remote.push(cluster.login, local, where)
    listing = cluster.sh(f"cd {shlex.quote(where)} && find . | sort && stat -c %a snapshot/run.sh")
    assert "./snapshot/pkg/a b.py" in listing
    assert listing.split()[-1] == "755"
    assert cluster.sh(f"readlink {shlex.quote(where)}/snapshot/link").strip() == "pkg"


def test_an_unknown_host_key_is_one_line_saying_what_to_do(cli, cluster, tmp_path):
    config = subprocess.run([REAL_SSH, "-G", cluster.alias], capture_output=True, text=True).stdout
    port = re.search(r"^port (\d+)$", config, re.M).group(1)  # type: ignore[union-attr]
    user = re.search(r"^user (\S+)$", config, re.M).group(1)  # type: ignore[union-attr]
    folder = project(tmp_path, {"x": "x\n"})
    # The same login node by its address: no known_hosts entry names it so.
    path = job(folder, "launcher: none\ncommand: [true]", f"{user}@127.0.0.1:{port}")
    done = cli("run", str(path), cwd=folder)
    assert done.rc != 0
    lines = done.err.strip().splitlines()
    assert len(lines) == 1, done.err
    assert "not in your known_hosts" in lines[0] and "ssh " in lines[0]
    assert "Traceback" not in done.err


def test_a_login_that_needs_a_prompt_is_one_line_saying_what_to_do(cli, cluster, tmp_path):
    folder = project(tmp_path, {"x": "x\n"})
    # The alias's host and host key, another user: no key of ours logs in as root there.
    path = job(folder, "launcher: none\ncommand: [true]", f"root@{cluster.alias}")
    done = cli("run", str(path), cwd=folder)
    assert done.rc != 0
    lines = done.err.strip().splitlines()
    assert len(lines) == 1, done.err
    assert "without a prompt" in lines[0] and "ssh-add" in lines[0]


SERVE = """\
import http.server, os, threading, time
node = os.environ["NODE_RANK"]
body = f"node {node}\\n".encode()


class Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


port = int(os.environ["SERVE_PORT"]) + int(node)
server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Page)
threading.Thread(target=server.serve_forever, daemon=True).start()
print(f"ready node={node}", flush=True)
time.sleep(600)
"""


def test_exec_and_forward_reach_a_remote_jobs_nodes_through_the_login_node(
    cli, cluster, tmp_path, home
):
    """srun --overlap runs on the login node too: this side has no Slurm to run it."""
    port = free_port_pair()
    folder = project(tmp_path, {"serve.py": SERVE})
    path = job(
        folder,
        f"launcher: none\nnodes: 2\nenv:\n  SERVE_PORT: '{port}'\ncommand: [python3, serve.py]",
        cluster.alias,
    )
    job_id = submitted(cli("run", str(path), "--detach", "--json", cwd=folder))
    wait_until(lambda: cli("logs", job_id).out.count("ready node=") == 2, 120, "both nodes")
    result = cli("exec", job_id, "--node", "1", "--", "printenv", "NODE_RANK", "SLURMD_NODENAME")
    assert (result.rc, result.out) == (0, "1\nn2\n"), result.err
    captured = cli("exec", job_id, "--json", "--", "sh", "-c", "exit 4").json()
    assert captured["exit_code"] == 4
    assert captured["via"].startswith(f"ssh {cluster.alias}, srun --jobid=")
    # A shell (ssh -t to the login node, srun --pty there) reaches the node as well.
    typed = live.shell_transcript(job_id, 1, "echo node=$NODE_RANK; exit 3", 120)
    assert typed["exit_code"] == 3 and "node=1" in typed["output"], typed
    proc = subprocess.Popen(
        [PY, "-m", "anylaunch", "forward", job_id, str(port + 1), "--node", "1",
         "--local-port", "0", "--json"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "ANYLAUNCH_HOME": str(home)},
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        text = ""
        while not text.rstrip().endswith("}"):
            text += proc.stdout.readline()
        opened = json.loads(text)
        assert opened["relayed"] and opened["via"].startswith(f"ssh {cluster.alias}, srun")
        with urllib.request.urlopen(opened["url"], timeout=60) as page:
            assert page.read() == b"node 1\n"
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0


def test_the_attempts_a_remote_job_records_of_itself_reach_status(cli, cluster, tmp_path):
    """A job that may continue itself past its time limit writes each run into its folder
    on the cluster; a poll brings that record back, so status says where the run was."""
    folder = project(tmp_path, {"hello.py": "print('hello')\n"})
    path = job(
        folder,
        "name: self-recorded\nlauncher: none\ncommand: [python3, hello.py]\n"
        "retry: {max_attempts: 3}",
        cluster.alias,
        slurm="time: '00:05:00'\nsignal_lead: 30",
    )
    done = cli("run", str(path), "--json", cwd=folder, timeout=240)
    assert done.rc == 0, done.err
    (first,) = cli("status", done.json()["id"], "--json", cwd=folder).json()["attempts"]
    assert first["state"] == "SUCCEEDED" and first["nodes"] in (["n1"], ["n2"]), first
