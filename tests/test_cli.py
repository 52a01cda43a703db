"""The command line as users and agents meet it: exit codes, one-line errors, --json, speed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

HEAVY = ("pydantic", "httpx", "boto3", "torch", "rich", "yaml", "anylaunch.backends.local.backend")


def test_help_imports_no_heavy_module(spawns):
    probe = (
        "import sys; sys.argv = ['anylaunch', '--help']\n"
        "from anylaunch.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    "args", [["ps"], ["status", "done0001"], ["status", "r-run0001"], ["status", "nosuchjob"]]
)
def test_commands_about_launched_jobs_import_no_job_file_models(args, home, spawns):
    """`ps` and `status` (of a job or a run) read the store and ask backends; they never
    read a job file, so they never pay for pydantic or YAML; nor for the diagnosis rules
    or an HTTP client when nothing is diagnosed or announced."""
    from anylaunch.state import State
    from anylaunch.store import JobRecord, Store

    store = Store(home)
    store.add(JobRecord(id="done0001", name="d", backend="local", state=State.PENDING,
                        job_dir=str(home / "jobs" / "done0001")))  # fmt: skip
    store.transition("done0001", State.FAILED, exit_code=3)
    split = JobRecord(id="split001", name="s", backend="local", state=State.PENDING,
                      job_dir=str(home / "jobs" / "split001"), run_id="r-run0001", split_id=0)  # fmt: skip
    store.add_run("r-run0001", None, [split])
    store.transition("split001", State.SUCCEEDED, exit_code=0)
    probe = (
        f"import sys; sys.argv = ['anylaunch', *{args!r}]\n"
        "from anylaunch.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('pydantic', 'yaml', 'anylaunch.observe.diagnose.rules',"
        " 'urllib.request') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stderr
    assert "Traceback" not in done.stderr
    if args[1:] == ["r-run0001"]:
        assert "run r-run0001 SUCCEEDED (local, 1 splits)" in done.stdout


def test_dry_run_builds_only_its_backend_section(tmp_path, home, spawns):
    job = tmp_path / "job.yaml"
    job.write_text("command: python train.py\nnodes: 2\nslurm: {partition: gpu}\n")
    probe = (
        f"import sys; sys.argv = ['anylaunch', 'run', {str(job)!r}, '--dry-run']\n"
        "from anylaunch.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('anylaunch.backends.')"
        " and m.endswith('.config')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert "#SBATCH" in out  # the plan was rendered
    assert out.strip().splitlines()[-1] == str(["anylaunch.backends.slurm.config"])


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        (
            "command: a\nenv:\n  X: ${UNSET_FOR_TEST}\n",
            {},
            ":3: env.X: environment variable UNSET_FOR_TEST is not set",
        ),
        (
            "command: a\nslurm:\n  partiton: batch\n",
            {},
            ":3: slurm.partiton: unknown key — did you mean 'partition'?",
        ),
        ("command: a\ngpus_per_node: many\n", {}, ":2: gpus_per_node:"),
        ("command: a\n  nodes: 2\n", {}, ":2: invalid YAML"),
    ],
)
def test_config_errors_exit_2_with_one_line_and_no_traceback(
    cli_inproc, write, text, env, expected
):
    path = write(text)
    result = cli_inproc("run", str(path), env=env)
    assert result.rc == 2
    assert result.out == ""
    assert result.err.count("\n") == 1 and "Traceback" not in result.err
    assert result.err.startswith(f"anylaunch: error: {path}{expected}")
    assert cli_inproc("ps", "--json").json() == []  # nothing stored


def test_missing_file_exits_2(cli_inproc, tmp_path):
    result = cli_inproc("run", str(tmp_path / "absent.yaml"))
    assert result.rc == 2 and "no such file" in result.err and "Traceback" not in result.err


def test_errors_with_json_are_objects_on_stdout(cli_inproc, write):
    result = cli_inproc("run", str(write("nodes: 0\n")), "--json")
    assert result.rc == 2
    error = result.json()["error"]
    assert error["code"] == "CONFIG" and "nodes" in error["message"]


def test_unknown_job_is_a_usage_error(cli_inproc):
    result = cli_inproc("status", "nosuchjob", "--json")
    assert result.rc == 2 and result.json()["error"]["code"] == "JOB_NOT_FOUND"


def test_usage_errors_exit_2(cli_inproc):
    result = cli_inproc("run")
    assert result.rc == 2 and "Missing argument" in result.err
    assert cli_inproc("ps", "--state", "DONE").rc == 2


def test_several_sections_need_backend(cli_inproc, write):
    path = write("command: a\nslurm: {}\nlepton: {}\n")
    result = cli_inproc("run", str(path), "--dry-run")
    assert result.rc == 2 and "--backend slurm" in result.err


def test_dry_run_of_a_recipe_with_config_placeholder(cli_inproc, write):
    path = write("model: {name: tiny}\nlocal: {nproc_per_node: 2}\n")
    result = cli_inproc(
        "run", str(path), "--dry-run", "--json", "--", "python", "-m", "trainer", "-c", "{config}"
    )
    assert result.rc == 0, result.err
    plan = result.json()["plan"]
    argv = plan["payload"]["nodes"][0]["argv"]
    assert argv[2].rstrip().endswith(f" -m trainer -c {plan['job_dir']}/recipe.yaml")
    assert plan["files"]["recipe.yaml"] == "model:\n  name: tiny\n"


def test_a_dry_run_leaves_no_process_behind(write, home):
    """Every command runs in its own process and ends with it: nothing of anylaunch
    outlives a dry-run (no server, no helper), whatever the backend. The dry-runs run in
    a PID namespace of their own, so whatever they leave is seen there, even a process
    that left their session and their environment."""
    import shutil

    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare (util-linux) for a PID namespace")
    path = write("command: python train.py\nnodes: 2\nslurm: {partition: gpu}\n")
    init = (
        "import os, subprocess, sys, time\n"
        "for backend in ('local', 'slurm'):\n"
        f"    argv = [sys.executable, '-m', 'anylaunch', 'run', {str(path)!r}, '--backend', backend,"
        " '--dry-run']\n"
        "    assert subprocess.run(argv, stdout=subprocess.DEVNULL).returncode == 0\n"
        "time.sleep(1)\n"
        "left = [p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]\n"
        "print([open(f'/proc/{p}/cmdline', 'rb').read().replace(b'\\0', b' ') for p in left])\n"
    )
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", init],
        capture_output=True, text=True, env={**os.environ, "ANYLAUNCH_HOME": str(home)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout
