"""The node script and the command rule, run by a real bash.

A string command is a shell line the node's bash runs; a list reaches the program word
for word. Under torchrun, the script calls whatever `torchrun` is on PATH: here a stand-in
that starts each "rank" the way torchrun does (the entrypoint, or `--no-python` argv), so
the shell's part of the rule is seen without a process group. The real torchrun runs in
the backends' end-to-end tests.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from anylaunch.node import command, shell
from anylaunch.node.command import Torchrun
from anylaunch.node.script import File, NodeScript, render

PY = sys.executable
SHOW = str(Path(__file__).resolve().parents[1] / "programs" / "show_argv.py")

# A torchrun stand-in: two "ranks" on this node, each started as torchrun would start it.
FAKE_TORCHRUN = r"""#!/bin/bash
opts=()
while [ $# -gt 0 ]; do
  case $1 in
    --nnodes|--nproc-per-node|--node-rank|--master-addr|--master-port|--max-restarts)
      opts+=("$1=$2"); shift 2 ;;
    *) break ;;
  esac
done
echo "OPTS ${opts[*]}"
for r in 0 1; do
  if [ "$1" = --no-python ]; then
    RANK=$r LOCAL_RANK=$r "${@:2}"
  else
    RANK=$r LOCAL_RANK=$r PYTHON "$@"
  fi
done
"""


def run(node: NodeScript, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    fake = tmp_path / "bin" / "torchrun"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text(FAKE_TORCHRUN.replace("PYTHON", PY))
    fake.chmod(0o755)
    base = {
        "PATH": f"{fake.parent}:/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "29500",
        "NNODES": "2",
        "NODE_RANK": "1",
    }
    return subprocess.run(
        ["bash", "-c", render(node)],
        env={**base, **env},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )


def argv_lines(out: str) -> list[list[str]]:
    return [json.loads(line[5:]) for line in out.splitlines() if line.startswith("ARGV ")]


def test_a_string_command_is_a_shell_line_with_variables_operators_and_redirections(tmp_path):
    line = 'echo "node $NODE_RANK of $NNODES" | tr a-z A-Z > out.txt && cat out.txt; exit 3'
    done = run(NodeScript(command=line, launcher="none"), tmp_path)
    assert done.returncode == 3, done.stderr
    assert done.stdout == "NODE 1 OF 2\n"


def test_a_list_command_reaches_the_program_literally(tmp_path):
    words = [PY, SHOW, "$(touch PWNED)", "$HOME", "`touch PWNED`", "a b", "*", "it's", "x\ny"]
    done = run(NodeScript(command=words, launcher="none"), tmp_path)
    assert done.returncode == 0, done.stderr
    assert argv_lines(done.stdout) == [words[2:]]
    assert not (tmp_path / "PWNED").exists()


def test_under_torchrun_a_python_script_line_keeps_the_dropped_python_rule(tmp_path):
    node = NodeScript(
        command=f"python {SHOW} --node=$NODE_RANK '$KEPT' \"$MASTER_ADDR\"",
        launcher="torchrun",
        torchrun=Torchrun(2),
    )
    text = render(node)
    assert "--no-python" not in text
    assert f"--max-restarts 0 {SHOW} --node=$NODE_RANK" in text  # left for the node's shell
    done = run(node, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == (
        "OPTS --nnodes=2 --nproc-per-node=2 --node-rank=1 --master-addr=10.0.0.1"
        " --master-port=29500 --max-restarts=0"
    )
    assert argv_lines(done.stdout) == [["--node=1", "$KEPT", "10.0.0.1"]] * 2


def test_under_torchrun_any_other_line_runs_once_per_rank_through_bash(tmp_path):
    node = NodeScript(
        command=f'echo "rank $RANK" >> ranks.txt && {PY} {SHOW} $NODE_RANK',
        launcher="torchrun",
        torchrun=Torchrun(2),
    )
    assert '--no-python bash -c "$ANYLAUNCH_COMMAND"' in render(node)
    done = run(node, tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "ranks.txt").read_text() == "rank 0\nrank 1\n"
    assert argv_lines(done.stdout) == [["1"], ["1"]]


def test_an_absolute_python_runs_torchrun_under_that_interpreter():
    line = command.program(
        "/opt/venv/bin/python3 -m pkg.train --x 1", "torchrun", torchrun=Torchrun(8)
    )
    assert line.line.startswith("/opt/venv/bin/python3 -m torch.distributed.run --nnodes")
    assert line.line.endswith("--max-restarts 0 -m pkg.train --x 1")
    listed = command.program(["/opt/py/bin/python", "t.py"], "torchrun", torchrun=Torchrun(8))
    assert listed.line.startswith("/opt/py/bin/python -m torch.distributed.run")
    assert listed.line.endswith(" t.py")


@pytest.mark.parametrize(
    "line",
    ["python -u train.py", "python train.py | tee log", "python train.py; echo done",
     "python $(which x).py", "cd sub && python t.py", "python t.py\npython u.py"],
)  # fmt: skip
def test_lines_that_are_more_than_a_script_call_go_through_bash(line):
    assert command.python_script(line) is None
    text = command.program(line, "torchrun", torchrun=Torchrun(1)).line
    assert text.endswith('--no-python bash -c "$ANYLAUNCH_COMMAND"')


def test_env_values_expand_names_on_the_node_and_nothing_else(tmp_path):
    nasty = "$(touch PWNED) `touch PWNED` ;|&><*?~'\"\\ $$ $((1+1)) %s"
    node = NodeScript(
        command=[PY, "-c", "import os; print('ENV', os.environ['A'], '|', os.environ['B'])"],
        launcher="none",
        env={"A": "/tmp/t_$NODE_RANK-${NNODES}_$UNSET.", "B": nasty},
    )
    done = run(node, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"ENV /tmp/t_1-2_. | {nasty}\n"
    assert not (tmp_path / "PWNED").exists()
    assert shell.env_value("plain value").text == "'plain value'"


def test_hooks_files_and_in_job_steps_keep_the_program_status(tmp_path):
    node = NodeScript(
        command="cat recipe.yaml; exit 4",
        launcher="none",
        files=[File("recipe.yaml", "a: 1\nANYLAUNCH_EOF\nb: $HOME\n")],
        before=["echo before"],
        pre=["echo pre"],
        post=['echo "post $rc"'],
        after=['echo "after $rc"; rc=0'],
    )
    done = run(node, tmp_path)
    assert done.stdout.splitlines() == [
        "before", "pre", "a: 1", "ANYLAUNCH_EOF", "b: $HOME", "post 4", "after 4",
    ]  # fmt: skip
    assert done.returncode == 0


@pytest.mark.parametrize(
    "post",
    [["rc=0"], ["exit 0"], ["for f in a; do rc=0; done", "echo post"], ["false"]],
    ids=["sets-rc", "exits", "loop-variable", "fails"],
)
def test_a_post_hook_never_replaces_the_program_status(tmp_path, post):
    done = run(NodeScript(command="exit 3", launcher="none", post=post), tmp_path)
    assert done.returncode == 3, done.stderr


def test_a_failing_pre_hook_stops_the_node_before_the_program(tmp_path):
    node = NodeScript(command="echo ran", launcher="none", pre=["false"])
    done = run(node, tmp_path)
    assert done.returncode != 0 and "ran" not in done.stdout


def test_a_command_holding_the_heredoc_marker_still_arrives_whole(tmp_path):
    line = "echo one\necho ANYLAUNCH_CMD\nANYLAUNCH_CMD=3; echo two $ANYLAUNCH_CMD"
    done = run(NodeScript(command=line, launcher="none"), tmp_path)
    assert done.stdout.splitlines() == ["one", "ANYLAUNCH_CMD", "two 3"], done.stderr


def test_config_stands_for_the_recipe_path_in_both_forms(tmp_path):
    recipe = tmp_path / "dir with space" / "recipe.yaml"
    node = NodeScript(command=[PY, SHOW, "--config={config}"], launcher="none", config=str(recipe))
    assert argv_lines(run(node, tmp_path).stdout) == [[f"--config={recipe}"]]
    node = NodeScript(
        command=f"{PY} {SHOW} --config {{config}}", launcher="none", config=str(recipe)
    )
    assert argv_lines(run(node, tmp_path).stdout) == [["--config", str(recipe)]]


def test_secrets_come_from_the_environment_and_are_never_written(tmp_path):
    node = NodeScript(command='echo "token=$HF_TOKEN"', launcher="none", env={"BATCH": "8"})
    text = render(node)
    assert "HF_TOKEN" in text and "s3cr3t" not in text
    done = run(node, tmp_path, HF_TOKEN="s3cr3t $(touch PWNED)")
    assert done.stdout == "token=s3cr3t $(touch PWNED)\n"
    assert not (tmp_path / "PWNED").exists()


def test_a_value_naming_itself_extends_what_the_node_had(tmp_path):
    node = NodeScript(
        command='echo "$PATH"', launcher="none", env={"PATH": "/opt/x/bin:$PATH", "A": "1"},
        env_references_only=True,
    )  # fmt: skip
    assert "export A=" not in render(node)
    assert run(node, tmp_path).stdout == f"/opt/x/bin:{tmp_path}/bin:/usr/bin:/bin\n"


@pytest.mark.parametrize(
    ("argv", "target"),
    [
        (["python", "t.py", "--x"], "t.py --x"),
        (["/opt/py/bin/python3", "-m", "pkg"], "-m pkg"),
        (["train.py"], "train.py"),
        ([PY, "-c", "print(1)"], f"--no-python {PY} -c 'print(1)'"),
        (["python", "-u", "t.py"], "--no-python python -u t.py"),
        (["./run.sh", "$X"], "--no-python ./run.sh '$X'"),
    ],
)
def test_a_listed_command_under_torchrun_drops_python_only_before_a_script(argv, target):
    line = command.program(argv, "torchrun", torchrun=Torchrun(1)).line
    assert line.endswith(f"--max-restarts 0 {target}")
