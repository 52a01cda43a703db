"""Shared fixtures: an isolated ANYLAUNCH_HOME and a way to run the real CLI."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Result:
    rc: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "home"
    monkeypatch.setenv("ANYLAUNCH_HOME", str(path))
    return path


SCHEMAS = ROOT / "docs" / "schemas"
_schemas: dict[str, dict] = {}


def json_schema_name(args: tuple[str, ...]) -> str:
    """Which docs/schemas/ file describes the `--json` output of these arguments."""
    words = [str(a) for a in args if not str(a).startswith("-")]
    return "-".join(words[:2]) if words[:1] == ["lepton"] else words[0]


def check_json_output(args: tuple[str, ...], result: Result) -> None:
    """Every `--json` output the suite sees must match its published schema: an error
    object the error schema, anything else the command's."""
    if "--json" not in args or "--" in args[: args.index("--json")]:
        return
    try:
        data = json.loads(result.out)
    except ValueError:
        if result.rc == 0:
            raise AssertionError(f"--json printed no JSON: {result.out[:500]!r}") from None
        return
    import jsonschema

    is_error = isinstance(data, dict) and data.get("kind") == "error"
    name = "error" if is_error else json_schema_name(args)
    if name not in _schemas:
        _schemas[name] = json.loads((SCHEMAS / f"{name}.json").read_text())
    try:
        jsonschema.validate(data, _schemas[name])
    except jsonschema.ValidationError as exc:
        raise AssertionError(
            f"`anylaunch {' '.join(args)}` printed JSON that breaks docs/schemas/{name}.json:"
            f" {exc.message} at {list(exc.absolute_path)} (if the change is meant, update"
            " src/anylaunch/contract/outputs.py and run python -m anylaunch.cli.schemas)"
        ) from None


@pytest.fixture
def cli(home):
    """Run `python -m anylaunch ARGS` as a user would, in a separate process; a `--json`
    output is checked against its schema on the way."""

    def run(
        *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 120
    ) -> Result:
        proc = subprocess.run(
            [sys.executable, "-m", "anylaunch", *args],
            capture_output=True,
            text=True,
            env={**os.environ, "ANYLAUNCH_HOME": str(home), **(env or {})},
            cwd=cwd,
            timeout=timeout,
        )
        result = Result(proc.returncode, proc.stdout, proc.stderr)
        check_json_output(args, result)
        return result

    return run


@pytest.fixture
def write(tmp_path):
    """Write a dedented job file and return its path."""

    def _write(text: str, name: str = "job.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text).lstrip())
        return path

    return _write


def devstack_env() -> dict[str, str] | None:
    """Settings written by `scripts/devstack up` (None when it is not up)."""
    path = ROOT / ".devstack" / "env"
    if not path.exists():
        return None
    env = {}
    for line in path.read_text().splitlines():
        words = shlex.split(line, comments=True)
        for word in words[1:] if words[:1] == ["export"] else words:
            key, sep, value = word.partition("=")
            if sep:
                env[key] = value
    return env


@pytest.fixture(scope="session")
def devstack() -> dict[str, str]:
    """The running devstack's settings. Missing devstack: a skip when a developer runs
    pytest by hand, a failure under scripts/test (ANYLAUNCH_REQUIRE_DEVSTACK=1)."""
    env = devstack_env()
    if env is None:
        if os.environ.get("ANYLAUNCH_REQUIRE_DEVSTACK"):
            pytest.fail("devstack is not up: run scripts/devstack up")
        pytest.skip("devstack is not up (scripts/devstack up)")
    return env


@pytest.fixture(scope="session")
def lepton_server():
    """One Lepton emulator server for the whole run (its own distribution, emulator/).
    Tests open a workspace of their own on it (`lepton_server.open(...)`): its token, jobs,
    secrets, faults and replica files are that test's alone, and closing it ends its
    replicas, so nothing leaks from one test to the next and no test waits for a server."""
    from lepton_emulator.server import Server

    with Server() as server:
        yield server


_DIAGNOSIS_CORPUS = ROOT / "tests" / "diagnose"
_corpus_ran: list[bool] = []


def pytest_collection_modifyitems(items):
    if any(Path(str(item.fspath)).parent == _DIAGNOSIS_CORPUS for item in items):
        _corpus_ran.append(True)


def pytest_terminal_summary(terminalreporter):
    """The diagnosis corpus' accuracy as one line, when its tests ran."""
    if _corpus_ran:
        from anylaunch.observe.diagnose import score

        cases = score.load(_DIAGNOSIS_CORPUS / "corpus")
        terminalreporter.write_line(score.score(cases).line())
