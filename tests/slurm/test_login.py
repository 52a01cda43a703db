"""The login node of a remote cluster, without one: what `slurm.login` accepts, what ssh's
complaints become, the private folder of the connections, and a dry run that needs no
connection at all when the job root is absolute."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from anylaunch.backends.slurm import remote
from anylaunch.backends.slurm.login import Login, LoginError, control_dir, explain


@pytest.mark.parametrize(
    ("text", "destination", "port"),
    [
        ("login.cluster.org", "login.cluster.org", None),
        ("alice@login.cluster.org", "alice@login.cluster.org", None),
        ("alice@login.cluster.org:2222", "alice@login.cluster.org", 2222),
        ("my-cluster", "my-cluster", None),  # an alias of ~/.ssh/config
        ("bob@[::1]:22", "bob@::1", 22),
    ],
)
def test_a_login_is_user_at_host_colon_port_or_an_alias(text, destination, port):
    login = Login.parse(text)
    assert (login.destination, login.port) == (destination, port)


@pytest.mark.parametrize(
    "text",
    [
        "-oProxyCommand=touch /tmp/x",  # an option, not a host: never handed to ssh
        "host:0",
        "host:70000",
        "a b",
        "user@",
        "host;rm -rf ~",
        "",
    ],
)
def test_anything_else_is_refused(text):
    with pytest.raises(ValueError, match=r"\[user@\]host\[:port\]"):
        Login.parse(text)


def test_a_bad_login_in_the_job_file_is_one_line_naming_the_key(cli_inproc, write):
    path = write("launcher: none\ncommand: [true]\nslurm:\n  login: -oProxyCommand=x\n")
    done = cli_inproc("run", str(path), "--dry-run")
    assert done.rc == 2
    assert done.err.count("\n") == 1
    assert "job.yaml:4: slurm.login:" in done.err and "[user@]host[:port]" in done.err


def test_a_bad_login_in_the_environment_is_one_line_naming_the_variable(cli_inproc, write):
    path = write("launcher: none\ncommand: [true]\nslurm: {}\n")
    done = cli_inproc("run", str(path), "--dry-run", env={"ANYLAUNCH_SLURM_LOGIN": "a b"})
    assert done.rc == 2
    assert "ANYLAUNCH_SLURM_LOGIN" in done.err and done.err.count("\n") == 1


# ssh's own words (OpenSSH sshconnect.c, sshconnect2.c, ssh.c), and what they must become.
COMPLAINTS = [
    (
        "No ED25519 host key is known for login.hpc.org and you have requested strict"
        " checking.\r\nHost key verification failed.\r\n",
        ["not in your known_hosts", "ssh login.hpc.org", "never skips host-key checking"],
    ),
    (
        "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\r\n"
        "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\r\n"
        "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\r\n"
        "IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!\r\n"
        "Host key verification failed.\r\n",
        ["not the one recorded", "ssh-keygen -R"],
    ),
    (
        "alice@login.hpc.org: Permission denied (publickey,password).\r\n",
        ["without a prompt", "ssh-add", "IdentityFile", "passphrase"],
    ),
    (
        "ssh: Could not resolve hostname login.hpc.org: Name or service not known\r\n",
        ["neither a host name nor an alias", "slurm.login"],
    ),
    (
        "ssh: connect to host login.hpc.org port 22: Connection timed out\r\n",
        ["cannot reach login.hpc.org", "Connection timed out"],
    ),
]


@pytest.mark.parametrize(("stderr", "words"), COMPLAINTS)
def test_each_ssh_complaint_is_one_line_saying_what_to_do(stderr, words):
    line = explain(Login.parse("login.hpc.org"), stderr)
    assert "\n" not in line and "\r" not in line
    for word in words:
        assert word in line, line


def test_the_connections_live_in_a_folder_only_this_user_enters(monkeypatch):
    runtime = Path(tempfile.mkdtemp(dir="/tmp"))  # short, as XDG_RUNTIME_DIR is
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    folder = control_dir()
    assert folder == runtime / "anylaunch-ssh"
    assert folder.stat().st_mode & 0o777 == 0o700
    folder.chmod(0o755)  # someone opened it up: no socket goes there
    with pytest.raises(LoginError, match="not a private folder"):
        control_dir()
    folder.chmod(0o700)
    assert Login.parse("h").socket.parent == folder
    assert len(str(Login.parse("h").socket)) < 100  # a socket's path has room for ~108 bytes
    shutil.rmtree(runtime)


def test_paths_on_the_cluster_are_under_its_home_unless_absolute():
    assert remote.expand("~/.anylaunch/jobs", "/home/a") == "/home/a/.anylaunch/jobs"
    assert remote.expand("scratch/jobs/", "/home/a") == "/home/a/scratch/jobs"
    assert remote.expand("/lustre/a/jobs", "/home/a") == "/lustre/a/jobs"


def test_a_dry_run_with_an_absolute_job_root_needs_no_connection(cli_inproc, write):
    path = write(
        "launcher: none\nnodes: 2\ncommand: [python3, train.py]\nenv: {HF_TOKEN: hf_x}\n"
        "slurm:\n  login: alice@login.hpc.org:2222\n  job_dir: /lustre/alice/jobs\n"
    )
    done = cli_inproc("run", str(path), "--dry-run", "--json", cwd=path.parent)
    assert done.rc == 0, done.err
    plan = done.json()["plan"]
    job_id = plan["job_id"]
    folder = f"/lustre/alice/jobs/{job_id}"
    assert plan["payload"]["login"] == "alice@login.hpc.org:2222"
    assert plan["payload"]["run_dir"] == folder
    assert plan["snapshot"] is True and plan["code_dir"] == str(path.parent)
    script = plan["payload"]["script"]
    assert f"#SBATCH --chdir={folder}/snapshot" in script
    assert f"#SBATCH --output={folder}/logs/node-0.log" in script
    assert "hf_x" not in done.out  # the secret travels on ssh's stdin, never in the plan
    text = cli_inproc("run", str(path), "--dry-run").out
    assert "# ssh alice@login.hpc.org:2222 sbatch --parsable --export=ALL,HF_TOKEN" in text
    assert "copied to alice@login.hpc.org:2222:/lustre/alice/jobs/" in text


def test_without_a_snapshot_a_remote_job_names_its_folder_on_the_cluster(cli_inproc, write):
    path = write(
        "launcher: none\ncommand: [true]\nsnapshot: false\n"
        "slurm:\n  login: h\n  job_dir: /scratch/jobs\n"
    )
    done = cli_inproc("run", str(path), "--dry-run")
    assert done.rc == 2
    assert "slurm.workdir" in done.err and "snapshot" in done.err
    path.write_text(path.read_text() + "  workdir: /scratch/code\n")
    done = cli_inproc("run", str(path), "--dry-run", "--json")
    assert done.rc == 0, done.err
    plan = done.json()["plan"]
    assert plan["snapshot"] is False and plan["code_dir"] is None
    assert "#SBATCH --chdir=/scratch/code" in plan["payload"]["script"]


def test_the_environment_names_the_login_of_every_job(cli_inproc, write):
    path = write("launcher: none\ncommand: [true]\nslurm: {job_dir: /scratch/jobs}\n")
    plain = cli_inproc("run", str(path), "--dry-run", "--json").json()["plan"]
    assert plain["payload"]["login"] is None and plain["snapshot"] is False
    env = {"ANYLAUNCH_SLURM_LOGIN": "cluster-alias"}
    remote_plan = cli_inproc("run", str(path), "--dry-run", "--json", env=env).json()["plan"]
    assert remote_plan["payload"]["login"] == "cluster-alias"
    assert os.environ.get("ANYLAUNCH_SLURM_LOGIN") is None  # given to the call only
