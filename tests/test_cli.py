"""The command line as users and agents meet it: exit codes, one-line errors, --json, speed."""

from __future__ import annotations

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


def test_dry_run_builds_only_its_backend_section_and_skips_the_plugin_scan(tmp_path, spawns):
    job = tmp_path / "job.yaml"
    job.write_text("command: python train.py\nnodes: 2\nslurm: {partition: gpu}\n")
    probe = (
        f"import sys; sys.argv = ['anylaunch', 'run', {str(job)!r}, '--dry-run']\n"
        "from anylaunch.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith(('anylaunch.', 'importlib.metadata'))"
        " and m.endswith(('.config', 'metadata'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert "#SBATCH" in out  # the plan was rendered
    # importlib.metadata is what pydantic's plugin scan imports.
    assert out.strip().splitlines()[-1] == str(
        ["anylaunch.backends.slurm.config", "anylaunch.config"]
    )


def test_the_python_api_keeps_pydantic_plugin_lookup(spawns):
    probe = (
        "import anylaunch\n"
        "anylaunch.load  # builds the job file models\n"
        "from anylaunch.config import from_text\n"
        "from_text('command: x\\n')\n"
        "import sys; print('importlib.metadata' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "True"


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
