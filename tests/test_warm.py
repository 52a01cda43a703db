"""Warm start: a dry-run answered by a warm server prints, exits and sees exactly what it
would in a process of its own, and the server holds no command's secrets, never runs
anything but a dry-run, and ends when its code changes, when idle, or when its socket
goes."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jsonschema
import pytest

from anylaunch.warm import server, wire

JOBS = {
    "local.yaml": "name: w\ncommand: python train.py --lr 0.1\nnodes: 2\ngpus_per_node: 8\n"
    "launcher: torchrun\n",
    "slurm.yaml": "name: w\ncommand: python train.py\nnodes: 2\ngpus_per_node: 8\n"
    "image: nvcr.io/nvidia/pytorch:25.08-py3\nslurm: {partition: '${PARTITION}', time: '01:00:00'}\n",
    "lepton.yaml": "name: w\ncommand: python train.py\nnodes: 2\ngpus_per_node: 8\n"
    "image: nvcr.io/nvidia/pytorch:25.08-py3\nlepton: {resource_shape: gpu.8xh100-sxm}\n"
    "env: {HF_TOKEN: '${HF_TOKEN}'}\n",
    "typo.yaml": "name: w\ncommand: python train.py\nslurm:\n  partitoin: gpu\n",
    "flow.yaml": "steps:\n  a: {command: 'true'}\n  b: {command: 'true', needs: [a]}\n",
    "sub/rel.yaml": "name: w\ncommand: python train.py\n",
}
SECRET = "hf_warmplantedvalue0123"
# The installed command, as users run it: its import path is the same from any folder
# (`python -m anylaunch` puts the working folder first, so each folder has its server).
COMMAND = [str(Path(sys.executable).parent / "anylaunch")]


@pytest.fixture
def warm(tmp_path, spawns):
    """An environment with warm start on, in a private runtime folder (short: a socket's
    path has a length limit), and the files of JOBS; every server is stopped after."""
    runtime = Path(tempfile.mkdtemp(prefix="alw-", dir="/tmp"))
    for name, text in JOBS.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    env = {
        **os.environ,
        "ANYLAUNCH_HOME": str(tmp_path / "home"),
        "XDG_RUNTIME_DIR": str(runtime),
        "ANYLAUNCH_WARM": "1",
        "ANYLAUNCH_WARM_IDLE_S": "120",
        "PARTITION": "gpu",
        "HF_TOKEN": SECRET,
    }
    env.pop("CI", None)
    yield Warm(tmp_path, runtime / f"anylaunch-warm-{os.getuid()}", env)
    for pid in _servers(runtime):
        _stop(pid)
    shutil.rmtree(runtime, ignore_errors=True)


class Warm:
    def __init__(self, cwd: Path, folder: Path, env: dict[str, str]):
        self.cwd, self.folder, self.env = cwd, folder, env

    def run(self, *args: str, cwd: Path | None = None, **env: str) -> tuple[int, str, str]:
        proc = subprocess.run(
            [*COMMAND, *args],
            capture_output=True,
            text=True,
            env={**self.env, **env},
            cwd=cwd or self.cwd,
            timeout=120,
        )
        return proc.returncode, proc.stdout, proc.stderr

    def started(self) -> int:
        """Run a dry-run, then wait until the server it starts listens; its pid."""
        self.run("run", "local.yaml", "--dry-run")
        deadline = time.monotonic() + 60
        while not list(self.folder.glob("*.sock")):
            assert time.monotonic() < deadline, f"no server started: {self.log()}"
            time.sleep(0.05)
        return int(next(self.folder.glob("*.lock")).read_text())

    def log(self) -> str:
        return "".join(path.read_text() for path in self.folder.glob("*.log"))

    def served(self) -> int:
        return self.log().count("served a dry-run")


def _servers(runtime: Path) -> list[int]:
    pids = []
    for lock in runtime.glob("*/*.lock"):
        text = lock.read_text().strip()
        if text:
            pids.append(int(text))
    return pids


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _stop(pid: int) -> None:
    if _alive(pid):
        os.kill(pid, signal.SIGTERM)


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + 60
    while _alive(pid):
        assert time.monotonic() < deadline, f"server {pid} is still running"
        time.sleep(0.05)


def normal(text: str) -> str:
    """A plan with its fresh job id and rendezvous port made constant: each dry-run draws
    new ones, warm or cold."""
    ids = re.findall(r"(?:jobs/|_ID=|id\": \"|-)([0-9a-z]{8})\b", text)
    for found in set(ids):
        text = text.replace(found, "<id>")
    return re.sub(r"(MASTER_PORT(?:=|\": \"))\d+", r"\1<port>", text)


CASES = [
    ("run", "local.yaml", "--dry-run"),
    ("run", "slurm.yaml", "--dry-run"),
    ("run", "slurm.yaml", "--dry-run", "--json"),
    ("run", "lepton.yaml", "--dry-run"),
    ("run", "lepton.yaml", "--dry-run", "--json"),
    ("run", "local.yaml", "--backend", "slurm", "--set", "nodes=4", "--dry-run"),
    ("run", "local.yaml", "--dry-run", "--", "python", "other.py", "--dry-run"),
    ("run", "typo.yaml", "--dry-run"),
    ("run", "typo.yaml", "--dry-run", "--json"),
    ("run", "missing.yaml", "--dry-run"),
    ("run", "local.yaml", "--backend", "nope", "--dry-run"),
    ("run", "local.yaml", "--set", "nodes=x", "--dry-run"),
    ("run", "flow.yaml", "--dry-run"),
    ("run", "flow.yaml", "--dry-run", "--json"),
]


def test_a_warm_dry_run_prints_and_exits_as_a_cold_one(warm):
    warm.started()
    assert "warm-up of" not in warm.log()  # each of the server's own dry-runs passed
    before = warm.served()
    for args in CASES:
        cold = warm.run(*args, ANYLAUNCH_WARM="0")
        hot = warm.run(*args)
        assert (hot[0], normal(hot[1]), hot[2]) == (cold[0], normal(cold[1]), cold[2]), args
        assert cold[1] or cold[2], args
    assert warm.served() - before == len(CASES), warm.log()
    # The cases include refusals, each the usual one line.
    assert warm.run("run", "typo.yaml", "--dry-run")[0] == 2


def test_the_path_and_the_environment_are_the_clients(warm):
    warm.started()
    rc, out, err = warm.run(
        "run", "rel.yaml", "--dry-run", "--backend", "slurm", cwd=warm.cwd / "sub"
    )
    assert rc == 0, err
    assert f"#SBATCH --chdir={warm.cwd / 'sub'}" in out
    for partition in ("a100", "h100"):
        rc, out, err = warm.run("run", "slurm.yaml", "--dry-run", PARTITION=partition)
        assert f"#SBATCH --partition={partition}" in out, out
    assert warm.served() == 3


def test_each_warm_dry_run_draws_its_own_job_id(warm):
    warm.started()
    ids = {
        re.search(r"ANYLAUNCH_JOB_ID=(\w+)", warm.run("run", "slurm.yaml", "--dry-run")[1])[1]
        for _ in range(3)
    }
    assert len(ids) == 3


def test_the_server_keeps_no_secret_of_a_command(warm):
    pid = warm.started()
    rc, out, err = warm.run("run", "lepton.yaml", "--dry-run")
    assert rc == 0 and warm.served() == 1, err
    assert "HF_TOKEN" in out and SECRET not in out + err
    assert SECRET.encode() not in Path(f"/proc/{pid}/environ").read_bytes()
    assert SECRET not in warm.log()
    names = [
        word.partition(b"=")[0] for word in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    ]
    assert b"PATH" in names and b"HF_TOKEN" not in names
    # Nor anything its warm-up opened: each worker opens the store it is told to.
    held = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
    assert not [path for path in held if "jobs.db" in path], held


def test_changed_code_ends_the_server_and_the_command_runs_cold(warm, tmp_path):
    extra = tmp_path / "extra"
    extra.mkdir()
    warm.env["PYTHONPATH"] = str(extra)  # on the import path: its changes count as code
    old = warm.started()
    (extra / "new_module.py").write_text("")
    rc, out, err = warm.run("run", "slurm.yaml", "--dry-run")
    assert rc == 0 and "#SBATCH --partition=gpu" in out, err
    _wait_gone(old)
    assert "code changed on disk" in warm.log()
    deadline = time.monotonic() + 60
    while _servers(warm.folder.parent) in ([], [old]) or not list(warm.folder.glob("*.sock")):
        assert time.monotonic() < deadline, warm.log()
        time.sleep(0.05)
    assert _servers(warm.folder.parent) != [old]  # the command started a fresh one


def test_a_server_ends_when_idle_and_when_its_socket_goes(warm):
    warm.env["ANYLAUNCH_WARM_IDLE_S"] = "1"
    pid = warm.started()
    _wait_gone(pid)
    assert "exit: idle" in warm.log() and not list(warm.folder.glob("*.sock"))

    warm.env["ANYLAUNCH_WARM_IDLE_S"] = "120"
    pid = warm.started()
    next(warm.folder.glob("*.sock")).unlink()
    _wait_gone(pid)
    assert "exit: socket removed" in warm.log()


def test_two_first_dry_runs_at_once_leave_one_server(warm):
    procs = [
        subprocess.Popen(
            [*COMMAND, "run", "local.yaml", "--dry-run"],
            env=warm.env,
            cwd=warm.cwd,
            stdout=subprocess.DEVNULL,
        )
        for _ in range(3)
    ]
    assert all(proc.wait(timeout=120) == 0 for proc in procs)
    pid = warm.started()
    assert warm.run("run", "local.yaml", "--dry-run")[0] == 0
    deadline = time.monotonic() + 60
    while len(_serving(warm.folder)) > 1:
        assert time.monotonic() < deadline, _serving(warm.folder)
        time.sleep(0.05)
    assert _serving(warm.folder) == [pid]


def _serving(folder: Path) -> list[int]:
    """Processes running a server for this folder."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and _alive(int(proc.name)):
            try:
                words = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"anylaunch.warm.server" in b" ".join(words) and str(folder).encode() in words:
                found.append(int(proc.name))
    return found


def test_ctrl_c_reaches_the_command_the_server_runs(warm):
    warm.started()
    fifo = warm.cwd / "blocked.yaml"
    os.mkfifo(fifo)  # reading the job file waits until a writer comes: it never does
    proc = subprocess.Popen(
        [*COMMAND, "run", str(fifo), "--dry-run"],
        env=warm.env,
        cwd=warm.cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not _worker_reading(fifo):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    assert "exit 130" in warm.log()


def _worker_reading(fifo: Path) -> bool:
    """A server's worker waits in open() for the FIFO's writer (Linux names the wait)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            status = (proc / "wchan").read_text()
            words = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if b"anylaunch.warm.server" in words and status == "wait_for_partner":
            return True
    return False


def test_ci_and_the_switch_keep_warm_start_off(warm):
    for env in ({"CI": "true", "ANYLAUNCH_WARM": ""}, {"ANYLAUNCH_WARM": "0"}):
        run_env = {**warm.env, **env}
        if not env.get("ANYLAUNCH_WARM"):
            run_env.pop("ANYLAUNCH_WARM")
        proc = subprocess.run(
            [*COMMAND, "run", "local.yaml", "--dry-run"],
            env=run_env,
            cwd=warm.cwd,
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr
        assert not list(warm.folder.glob("*")), "a server was asked for"


def test_a_bad_switch_is_one_line_that_says_what_to_set(warm):
    rc, out, err = warm.run("run", "local.yaml", "--dry-run", ANYLAUNCH_WARM="maybe")
    assert rc == 2 and out == ""
    assert err.strip().count("\n") == 0
    assert err.startswith("anylaunch: error: ANYLAUNCH_WARM='maybe'") and "ANYLAUNCH_WARM=0" in err
    rc, out, err = warm.run("run", "local.yaml", "--dry-run", "--json", ANYLAUNCH_WARM="maybe")
    assert rc == 2 and err == ""
    error = json.loads(out)
    assert error["kind"] == "error" and error["error"]["code"] == "USAGE"
    assert "ANYLAUNCH_WARM='maybe'" in error["error"]["message"]
    schema = json.loads((Path(__file__).parent.parent / "docs/schemas/error.json").read_text())
    jsonschema.validate(error, schema)


@pytest.mark.parametrize(
    ("args", "sent"),
    [
        (["run", "job.yaml", "--dry-run"], True),
        (["run", "--dry-run", "job.yaml", "--json"], True),
        (["run", "job.yaml", "--", "python", "x.py", "--dry-run"], False),
        (["run", "job.yaml"], False),
        (["ps", "--dry-run"], False),
        ([], False),
    ],
)
def test_only_a_dry_run_is_sent_to_a_server(args, sent):
    assert wire.eligible(args) is sent


@pytest.mark.parametrize(
    ("args", "runs"),
    [
        (["run", "job.yaml", "--dry-run"], True),
        # `--set` takes the next word as its value: this is a real run, never a dry-run.
        (["run", "job.yaml", "--set", "--dry-run"], False),
        (["run", "job.yaml", "--dry-run", "--", "x"], True),
        (["run", "job.yaml"], False),
    ],
)
def test_the_server_checks_with_the_real_parser(args, runs):
    assert server._is_dry_run(args) is runs


def test_the_switch_reads_as_documented():
    assert wire.enabled({}) is True
    assert wire.enabled({"CI": "true"}) is False
    assert wire.enabled({"CI": "true", "ANYLAUNCH_WARM": "1"}) is True
    assert wire.enabled({"ANYLAUNCH_WARM": "off"}) is False
    with pytest.raises(wire.WarmSwitchError):
        wire.enabled({"ANYLAUNCH_WARM": "2"})


def test_a_folder_others_can_enter_is_not_used():
    runtime = Path(tempfile.mkdtemp(prefix="alw-", dir="/tmp"))
    try:
        shared = runtime / f"anylaunch-warm-{os.getuid()}"
        shared.mkdir(mode=0o755)
        shared.chmod(0o755)
        assert wire.directory({"XDG_RUNTIME_DIR": str(runtime)}) is None
        shared.chmod(0o700)
        assert wire.directory({"XDG_RUNTIME_DIR": str(runtime)}) == str(shared)
    finally:
        shutil.rmtree(runtime)


def test_a_folder_too_long_for_a_socket_is_not_used(tmp_path):
    deep = tmp_path / ("x" * 80)
    deep.mkdir()
    assert wire.directory({"XDG_RUNTIME_DIR": str(deep)}) is None


def test_a_server_that_cannot_start_is_not_started_again_at_once(warm):
    pid = warm.started()
    sock = next(warm.folder.glob("*.sock"))
    _stop(pid)
    _wait_gone(pid)
    sock.mkdir()  # where the next server's socket must go: it cannot listen
    assert warm.run("run", "local.yaml", "--dry-run")[0] == 0
    failed = sock.with_suffix(".failed")
    deadline = time.monotonic() + 60
    while not failed.exists():
        assert time.monotonic() < deadline, warm.log()
        time.sleep(0.05)
    for _ in range(3):
        rc, out, err = warm.run("run", "local.yaml", "--dry-run")
        assert rc == 0 and "node 0" in out, err
    assert warm.log().count("Traceback") == 1, warm.log()


def test_a_server_stopped_while_it_warms_up_leaves_nothing_behind(warm, tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    warm.env["TMPDIR"] = str(scratch)  # where the server's warm-up writes its job files
    assert warm.run("run", "local.yaml", "--dry-run")[0] == 0
    deadline = time.monotonic() + 60
    while not list(scratch.glob("anylaunch-warm-*")):
        assert time.monotonic() < deadline and not list(warm.folder.glob("*.sock")), warm.log()
        time.sleep(0.005)
    pid = int(next(warm.folder.glob("*.lock")).read_text())
    os.kill(pid, signal.SIGTERM)
    _wait_gone(pid)
    assert "stopped before it listened" in warm.log()
    assert list(scratch.iterdir()) == [] and not list(warm.folder.glob("*.sock"))
    assert not list(warm.folder.glob("*.failed"))
