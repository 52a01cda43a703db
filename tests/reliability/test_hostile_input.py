"""Hostile input: whatever a job file or `--set` holds gives a JobSpec or a one-line
error — never a traceback — and shell metacharacters in names, commands, env values and
paths reach the job literally, on the local backend and on Slurm.

tests/test_config_fuzz.py covers text and structures through `loader.from_text`; here:
the override parser on its own, raw bytes through `loader.load` (files are bytes),
YAML's own weapons (alias bombs, deep nesting, tags), and the real CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability_helpers import FIGURES, PY, cli_env, count_tracebacks, wait_until

import inproc
from anylaunch.errors import ConfigError
from anylaunch.jobfile import loader, overrides

NASTY = (
    "$(touch PWNED) `touch PWNED` ;touch PWNED; | & > < * ? ~ ' \" \\ \n\t{x} %s %n $$ ${HOME} !!"
)


def _one_line(call) -> None:
    FIGURES["hostile inputs"] += 1
    try:
        call()
    except ConfigError as exc:
        assert exc.message and "\n" not in exc.message, exc.message


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_any_override_text_parses_or_is_one_line_error(text: str) -> None:
    _one_line(lambda: overrides.parse_override(text))


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary(max_size=300))
def test_any_bytes_in_a_job_file_load_or_are_one_line_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "job.yaml"
    path.write_bytes(data)
    _one_line(lambda: loader.load(path, environ={}))


@pytest.mark.parametrize(
    "text",
    [
        # billion laughs: aliases that expand exponentially
        "a: &a [x, x, x, x, x, x, x, x, x]\n"
        + "".join(f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
                  for p, c in zip("abcdefgh", "bcdefghi", strict=True))
        + "command: [*i]\n",
        "command: " + "[" * 5000 + "]" * 5000 + "\n",  # deeper than Python's recursion limit
        "command: !!python/object/apply:os.system ['touch PWNED']\n",
        "nodes: 1" + "0" * 5000 + "\n",
        "env: {A: !!binary aGVsbG8=}\ncommand: 'true'\n",
        "\ufeffcommand: 'true'\nname: " + "x" * 100000 + "\n",
        "command: 'true'\n<<: {nodes: 2}\n",
        "? [a, b]\n: c\ncommand: 'true'\n",
        "command: 'true'\nenv: {'': x}\n",
        "command: 'true'\nenv: {'A=B': x, 'A B': y}\n",
        # under libyaml's own nesting limit (1000), over Python's stack for the walkers
        "command: [echo]\nmodel: " + "{a: " * 400 + "x" + "}" * 400 + "\n",
        "command: [echo]\n" + "".join(
            f"l{i}: &l{i} [[[[[[[[[[{f'*l{i - 1}' if i else 'x'}]]]]]]]]]]\n" for i in range(60)
        ),  # each anchor nests the one before ten levels deeper
    ],
    ids=["alias-bomb", "deep", "python-tag", "huge-int", "binary", "bom-long", "merge",
         "complex-key", "empty-env-name", "bad-env-names", "nested-400", "aliases-deepen"],
)  # fmt: skip
def test_yaml_weapons_are_one_line_errors_from_the_cli(
    text: str, tmp_path: Path, home: Path
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    done = inproc.completed(("run", str(path), "--dry-run", "--json"), cli_env(home), tmp_path)
    FIGURES["hostile inputs"] += 1
    assert count_tracebacks(done.stdout, done.stderr) == 0, done.stderr[-2000:]
    assert done.returncode in (0, 2), done.stderr[-2000:]
    if done.returncode == 2:
        assert "\n" not in json.loads(done.stdout)["error"]["message"]
    assert not (tmp_path / "PWNED").exists()


OVERRIDE_WEAPONS = {
    "deep-value": "model=" + "[" * 600 + "]" * 600,
    "alias-bomb-value": "model={a: &a [x, x, x, x, x, x, x, x, x, x], "
    + ", ".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]"
        for p, c in zip("abcdefg", "bcdefgh", strict=True)
    )
    + "}",
    "deep-key": ".".join(["model"] * 3000) + "=1",
    "huge-int-value": "nodes=" + "9" * 5000,
    "huge-key-part": "model." + "9" * 5000 + "=1",
    "huge-index": "mounts." + "9" * 5000 + ".dest=/x",
    "flow-key-part": "model." + "[" * 600 + "=1",
}


@pytest.mark.parametrize("weapon", sorted(OVERRIDE_WEAPONS))
def test_override_weapons_are_one_line_errors_from_the_cli(
    weapon: str, tmp_path: Path, home: Path
) -> None:
    """`--set` values are read as YAML too (an agent's tool call carries them as well)."""
    path = tmp_path / "job.yaml"
    path.write_text("command: [echo]\nmodel: {a: 1}\nmounts: ['/a:/b']\n")
    args = ("run", str(path), "--dry-run", "--json", "--set", OVERRIDE_WEAPONS[weapon])
    done = inproc.completed(args, cli_env(home), tmp_path)
    FIGURES["hostile inputs"] += 1
    assert count_tracebacks(done.stdout, done.stderr) == 0, done.stderr[-2000:]
    assert done.returncode in (0, 2), done.stderr[-2000:]
    if done.returncode == 2:
        assert "\n" not in json.loads(done.stdout)["error"]["message"]


WORKDIR = "dir with 'quotes' $(x) ;&|"


def _hostile_job(tmp_path: Path, backend: str) -> tuple[Path, Path, Path]:
    """A job whose name, argv, env value and working directory carry shell syntax; the
    program writes what it received as JSON."""
    workdir = tmp_path / WORKDIR
    workdir.mkdir()
    out = tmp_path / "received.json"
    dumper = workdir / "dump.py"
    dumper.write_text(
        "import json, os, sys\n"
        f"json.dump({{'argv': sys.argv[1:], 'env': os.environ.get('NASTY'),"
        f" 'home': os.environ.get('HOME'), 'cwd': os.getcwd()}}, open({str(out)!r}, 'w'))\n"
    )
    job = {
        "name": "n$(touch PWNED);`x`",
        "launcher": "none",
        "command": [PY, str(dumper), NASTY, "--flag=$(touch PWNED)", "*"],
        "env": {"NASTY": NASTY},
        backend: {"workdir": str(workdir)},
    }
    path = tmp_path / "job.yaml"
    path.write_text(json.dumps(job).replace("$", "$$"))  # JSON is YAML; `$$` is a literal `$`
    return path, out, workdir


def _check_received(out: Path, workdir: Path, tmp_path: Path) -> None:
    got = json.loads(out.read_text())
    assert got["argv"] == [NASTY, "--flag=$(touch PWNED)", "*"]
    # An env value is expanded on the node for `$NAME` / `${NAME}` only (`${HOME}` here);
    # command substitution, backticks and every other metacharacter stay literal.
    assert got["env"] == NASTY.replace("${HOME}", got["home"])
    assert os.path.realpath(got["cwd"]) == os.path.realpath(workdir)
    assert not list(tmp_path.rglob("PWNED")) and not Path("PWNED").exists()


def test_shell_metacharacters_reach_a_local_job_literally(
    tmp_path: Path, home: Path, spawns
) -> None:
    path, out, workdir = _hostile_job(tmp_path, "local")
    _accepted_run(path, cli_env(home), workdir)
    _check_received(out, workdir, tmp_path)


def test_shell_metacharacters_reach_a_slurm_job_literally(
    tmp_path: Path, home: Path, devstack: dict[str, str]
) -> None:
    path, out, workdir = _hostile_job(tmp_path, "slurm")
    env = cli_env(home, SLURM_CONF=devstack["SLURM_CONF"])
    job_id = _accepted_run(path, env, workdir, "--detach", "--no-preflight")["id"]

    def ended() -> dict | None:
        status = subprocess.run(
            [PY, "-m", "anylaunch", "status", job_id, "--json"],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        data = json.loads(status.stdout)
        return data if data["state"] in ("SUCCEEDED", "FAILED", "CANCELLED", "TIMEOUT") else None

    final = wait_until(ended, timeout=90, what="the Slurm job to end", interval=0.5)
    assert final["state"] == "SUCCEEDED", final
    _check_received(out, workdir, tmp_path)


def _accepted_run(path: Path, env: dict[str, str], workdir: Path, *args: str) -> dict:
    """`anylaunch run --json` of this job file from `workdir`: exit 0, no traceback."""
    done = subprocess.run(
        [PY, "-m", "anylaunch", "run", str(path), "--json", *args],
        env=env, capture_output=True, text=True, timeout=120, cwd=workdir,
    )  # fmt: skip
    FIGURES["hostile inputs"] += 1
    assert count_tracebacks(done.stdout, done.stderr) == 0
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _refused_from_the_cli(text: str, tmp_path: Path, home: Path, *args: str) -> str:
    """`anylaunch run` of this job file: exit 2, one line naming file and line, nothing
    stored. Returns the message."""
    path = tmp_path / "job.yaml"
    path.write_text(text)
    done = inproc.completed(("run", str(path), *args), cli_env(home), tmp_path)
    FIGURES["hostile inputs"] += 1
    assert count_tracebacks(done.stdout, done.stderr) == 0, done.stderr[-2000:]
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    if "--json" in args:
        message = json.loads(done.stdout)["error"]["message"]
    else:
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        message = done.stderr.strip()
    assert f"{path}:" in message and "\n" not in message, message
    assert not (home / "jobs.db").exists() or _stored(home) == 0
    return message


def _stored(home: Path) -> int:
    import sqlite3

    db = sqlite3.connect(home / "jobs.db")
    try:
        return db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
    finally:
        db.close()


SECTIONS = {
    "local": "local: {}\n",
    "slurm": "slurm: {}\n",
    "skypilot": "skypilot: {infra: slurm/devstack}\n",
    "lepton": "image: python:3.11\nlepton: {resource_shape: cpu.small}\n",
}
BAD_VALUES = {
    "nul-in-command-line": ('command: "echo a\\0b"\n', "NUL"),
    "nul-in-command-list": ('command: [echo, "a\\0b"]\n', "NUL"),
    "nul-in-env-value": ('command: [echo]\nenv: {A: "x\\0y"}\n', "NUL"),
    "nul-in-hook": ('command: [echo]\nhooks: {pre: "echo \\0"}\n', "NUL"),
    "env-name-with-equals": ('command: [echo]\nenv: {"A=B": x}\n', "'A=B'"),
    "env-name-with-space": ('command: [echo]\nenv: {"A B": x}\n', "'A B'"),
    "env-name-empty": ('command: [echo]\nenv: {"": x}\n', "''"),
    "env-name-digit-first": ('command: [echo]\nenv: {"1A": x}\n', "'1A'"),
    "name-with-newline": ('command: [echo]\nname: "a\\nb"\n', "control character"),
    "name-with-nul": ('command: [echo]\nname: "a\\0b"\n', "control character"),
}


@pytest.mark.parametrize("backend", sorted(SECTIONS))
@pytest.mark.parametrize("case", sorted(BAD_VALUES))
def test_bad_names_and_values_are_refused_for_every_backend_before_anything_is_stored(
    case: str, backend: str, tmp_path: Path, home: Path
) -> None:
    text, says = BAD_VALUES[case]
    message = _refused_from_the_cli(text + SECTIONS[backend], tmp_path, home, "--json")
    assert says in message, message


@pytest.mark.parametrize(
    "section", ["slurm: {env_vars: {'A=B': x}}\n", "lepton: {resource_shape: cpu.small, env_vars: {'A B': x}}\n",
                "skypilot: {infra: slurm/devstack, env_vars: {'': x}}\n",
                "slurm: {env_vars: {A: \"\\0\"}}\n"],
    ids=["slurm", "lepton", "skypilot", "slurm-nul"],
)  # fmt: skip
def test_bad_names_in_a_backend_sections_env_are_refused_at_their_line(
    section: str, tmp_path: Path, home: Path
) -> None:
    message = _refused_from_the_cli("command: [echo]\n" + section, tmp_path, home)
    assert "job.yaml:2:" in message, message


def _chain_backwards(steps: int) -> str:
    """A workflow whose `needs` chain is written last step first: s0 needs s1, ..."""
    lines = ["name: chain", "launcher: none", "steps:"]
    for i in range(steps):
        needs = f", needs: [s{i + 1}]" if i + 1 < steps else ""
        lines.append(f"  s{i}: {{command: [echo, '{i}']{needs}}}")
    return "\n".join(lines) + "\n"


def test_a_needs_chain_of_a_thousand_steps_written_backwards_is_planned(
    tmp_path: Path, home: Path
) -> None:
    path = tmp_path / "wf.yaml"
    path.write_text(_chain_backwards(1000))
    done = inproc.completed(("run", str(path), "--dry-run", "--json"), cli_env(home), tmp_path)
    FIGURES["hostile inputs"] += 1
    assert count_tracebacks(done.stdout, done.stderr) == 0, done.stderr[-2000:]
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["order"][:2] == ["s999", "s998"]


def test_a_needs_chain_written_backwards_is_recorded_and_started_detached(
    tmp_path: Path, home: Path, spawns
) -> None:
    path = tmp_path / "wf.yaml"
    path.write_text(_chain_backwards(400))
    env = cli_env(home)
    done = subprocess.run(
        [PY, "-m", "anylaunch", "run", str(path), "--detach", "--json", "--no-preflight"],
        env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    FIGURES["hostile inputs"] += 1
    assert count_tracebacks(done.stdout, done.stderr) == 0, done.stderr[-2000:]
    assert done.returncode == 0, done.stderr[-2000:]
    workflow_id = json.loads(done.stdout)["id"]
    stopped = subprocess.run(
        [PY, "-m", "anylaunch", "cancel", workflow_id, "--json"],
        env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert stopped.returncode == 0, stopped.stderr[-2000:]


@pytest.mark.parametrize("where", ["command", "hook", "env"])
def test_an_output_uri_cannot_run_shell_text_in_the_step_that_names_it(
    where: str, tmp_path: Path, home: Path
) -> None:
    """A step's output URI named in another step's text is spliced into that text, which
    for a command or hook is a shell line: shell syntax in the URI is refused, not run."""
    pwned = tmp_path / "PWNED"
    named = {
        "command": "    command: 'echo ${steps.a.outputs.m}'\n",
        "hook": "    command: [echo]\n    hooks: {pre: 'echo ${steps.a.outputs.m}'}\n",
        "env": "    command: [echo]\n    env: {M: '${steps.a.outputs.m}'}\n",
    }[where]
    path = tmp_path / "wf.yaml"
    path.write_text(
        "launcher: none\nsteps:\n  a:\n    command: [echo]\n"
        f"    outputs: {{m: 's3://bucket/x$(touch {pwned})'}}\n"
        f"  b:\n{named}"
    )
    for args in (("--dry-run", "--json"), ("--detach", "--json")):
        done = inproc.completed(("run", str(path), *args), cli_env(home), tmp_path)
        FIGURES["hostile inputs"] += 1
        assert count_tracebacks(done.stdout, done.stderr) == 0, done.stderr[-2000:]
        assert done.returncode == 2, done.stdout[-2000:]
        error = json.loads(done.stdout)["error"]
        assert error["code"] == "CONFIG" and "steps.b" in error["message"], error
    assert not pwned.exists()
