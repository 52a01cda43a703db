"""The node side of exec, stack and the watchdog, on process tables written here: which
process holds a node's environment, which process is a rank, what the watchdog writes."""

from __future__ import annotations

import pytest

from anylaunch.jobfile.secrets import name_pattern
from anylaunch.node import runtime
from anylaunch.node.runtime import live
from anylaunch.node.runtime.live import Proc

BASE = {"ANYLAUNCH_JOB_ID": "j1", "PATH": "/usr/bin"}


def table() -> list[Proc]:
    """A torchrun node as /proc shows it: the node's shell, the agent (which the shell
    gave the job's env:), a rank run through `bash -c`, its Python program, a loader."""
    node = {**BASE, "NODE_RANK": "1"}
    agent = {**node, "MY_SETTING": "x", "HF_TOKEN": "hf_abcdef123"}
    rank = {**agent, "RANK": "3", "LOCAL_RANK": "1"}
    return [
        Proc(10, 1, node, "/usr/bin/bash"),
        Proc(11, 10, agent, "/usr/bin/python3.11"),
        Proc(12, 11, rank, "/usr/bin/bash"),
        Proc(13, 12, rank, "/usr/bin/python3.11"),
        Proc(14, 13, rank, "/usr/bin/python3.11"),  # a data loader worker of rank 3
        Proc(20, 1, {**BASE, "NODE_RANK": "0"}, "/usr/bin/bash"),
    ]


def test_the_node_environment_is_the_one_that_holds_the_jobs_env():
    chosen = live.node_process(table(), 1)
    assert chosen is not None and chosen.pid == 11
    assert live.node_env(chosen)["MY_SETTING"] == "x"
    assert live.node_process(table(), 5) is None


def test_a_node_whose_every_process_is_a_rank_gives_its_environment_without_rank_variables():
    procs = [p for p in table() if "RANK" in p.env]
    chosen = live.node_process(procs, 1)
    assert chosen is not None and chosen.pid == 12
    env = live.node_env(chosen)
    assert "RANK" not in env and "LOCAL_RANK" not in env and env["NODE_RANK"] == "1"


def test_a_rank_is_its_first_python_process():
    found = live.ranks(table())
    assert [(r["rank"], r["local_rank"], r["node"], r["pid"]) for r in found] == [(3, 1, 1, 13)]
    assert live.ranks(table(), node=0) == []


def test_the_hang_report_has_the_agreed_lines():
    found = [
        {"rank": 1, "node": 0, "pid": 7, "stack": "Thread 7 (idle)\n    f (a.py:1)\n"},
        {"rank": 0, "node": 0, "pid": 6, "stack": None, "error": "py-spy: refused"},
    ]
    assert live.hang_report(61.7, found).splitlines() == [
        "anylaunch: hang: no rank wrote output for 61s; the Python stack of every rank follows",
        "anylaunch: hang: rank 0 (node 0, pid 6)",
        "py-spy: refused",
        "anylaunch: hang: rank 1 (node 0, pid 7)",
        "Thread 7 (idle)",
        "    f (a.py:1)",
    ]


def test_what_a_node_prints_is_masked_by_name_and_by_the_secret_name_rule():
    env = {"HF_TOKEN": "hf_abcdef123", "MY_PASS_PHRASE": "open-sesame", "USER": "alice"}
    hidden = live.secret_values(env, ["MY_PASS_PHRASE"], name_pattern())
    assert live.mask("hf_abcdef123 open-sesame alice", hidden) == "*** *** alice"


def test_py_spy_from_the_submitting_side_is_used_only_where_the_node_sees_it(tmp_path):
    assert live.find_py_spy(str(tmp_path / "absent")) == live.find_py_spy(None)
    tool = tmp_path / "py-spy"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert live.find_py_spy(str(tool)) == str(tool)
    text, error = live.dump(1, None)
    assert text is None and "install it there" in error


def test_the_runtime_carries_the_live_commands():
    assert "live.py" in " ".join(runtime.zipapp().decode("latin-1").split("\0"))
    argv = runtime.live_argv("stack", "j1")
    assert argv[:4] == ["python3", "-I", "-S", "-c"] and argv[-2:] == ["stack", "j1"]
    assert live.main(["enter", "j1"]) == 2


@pytest.mark.parametrize(
    ("written", "seconds"), [(90, 90.0), ("90s", 90.0), ("10m", 600.0), ("1.5h", 5400.0)]
)
def test_watchdog_idle_takes_seconds_or_a_unit(written, seconds):
    from anylaunch.jobfile.spec import JobSpec

    spec = JobSpec.model_validate({"command": "x", "watchdog": {"idle": written}})
    assert spec.watchdog is not None and spec.watchdog.idle == seconds


def test_a_bad_watchdog_is_one_line_naming_file_line_and_key(cli_inproc, write):
    path = write("command: python train.py\nwatchdog:\n  idle: soon\n")
    result = cli_inproc("run", str(path), "--dry-run")
    assert result.rc == 2
    assert result.err.strip() == (
        f"anylaunch: error: {path}:3: watchdog.idle: 'soon' is not a duration — write"
        " seconds (600) or 90s, 10m, 1h"
    )


def test_the_slurm_script_runs_the_watchdog_in_the_allocation(cli_inproc, write):
    path = write(
        "command: python train.py\nnodes: 2\nwatchdog: {idle: 10m}\nenv: {HF_TOKEN: t0k3n-value}\n"
        "slurm: {partition: debug}\n"
    )
    script = cli_inproc("run", str(path), "--dry-run", "--json").json()["plan"]["payload"]["script"]
    watch = next(line for line in script.splitlines() if " watch --idle 600 " in line)
    assert '--pid "$srun_pid"' in watch and "-- srun --overlap --nodes=2 --ntasks=2" in watch
    assert "--secret HF_TOKEN" in watch and "t0k3n-value" not in script
    assert 'wait "$watch_pid"; [ "$?" = 99 ] && rc=99' in script
    assert "anylaunch_job.pyz" in script  # the runtime is written for the watcher


def test_a_watchdog_on_a_backend_without_one_is_a_preflight_warning(cli_inproc, write):
    path = write("command: python -m train\nwatchdog: {idle: 10m}\nlepton: {gpu_count: 1}\n")
    checks = cli_inproc("preflight", str(path), "--json", env={"LEPTON_AUTH_TOKEN": ""}).json()
    found = [c for c in checks["checks"] if c["name"] == "watchdog"]
    assert [c["status"] for c in found] == ["warn"]
    assert "lepton backend has no hang watchdog" in found[0]["message"]
    local = write("command: python -m train\nwatchdog: {idle: 10m}\n", "local.yaml")
    assert "watchdog" not in cli_inproc("preflight", str(local), "--json").out
