"""Shared fixtures: an isolated ANYLAUNCH_HOME and two ways to run the real CLI (in this
process, or in a separate one as a user would); and the tiers: markers that follow from
the fixtures a test uses, and `fast` for the tests that need none of them."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

import inproc

ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    # A test without the `home` fixture still never reads or writes the user's own store:
    # one left by another anylaunch release would otherwise decide the outcome.
    os.environ["ANYLAUNCH_HOME"] = tempfile.mkdtemp(prefix="anylaunch-tests-home-")
    # A suite started in the background of a shell without job control (`cmd &` in a
    # script, nohup) inherits SIGINT ignored, and so would every process it starts: the
    # tests that press Ctrl-C on a `run` or a `forward` would then wait out their timeout.
    # A Python handler does not survive exec, so the processes started from here get
    # SIGINT's default again, as they would from a terminal.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


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


@pytest.fixture(scope="session")
def spawns() -> None:
    """Says that the test starts processes (itself, or a fixture of any scope that asks
    for this one): it is marked `spawns` and left out of the fast tier. A fast test that
    starts a Python process or forks fails."""


@pytest.fixture
def cli(home, spawns):
    """Run `python -m anylaunch ARGS` as a user would, in a separate process; a `--json`
    output is checked against its schema on the way. For commands that start local jobs,
    and the smoke tests of the entry point; `cli_inproc` is the same contract, faster."""

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
def cli_inproc(home):
    """`cli`, called inside this process (anylaunch.cli's entry point): the same
    environment, working folder, exit status, stdout and stderr, and schema check of
    `--json` output, without an interpreter start per command. A command that would start
    a local job fails the test: that one needs `cli`. `timeout` is accepted for the same
    signature; pytest-timeout bounds an in-process call."""

    def run(
        *args: str,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        timeout: float | None = None,
    ) -> Result:
        environ = {**os.environ, "ANYLAUNCH_HOME": str(home), **(env or {})}
        result = Result(*inproc.call(tuple(str(a) for a in args), environ, cwd))
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


@pytest.fixture
def torch():
    """torch, for a test whose job runs it (torchrun, DDP on CPU): marked `torch`."""
    return pytest.importorskip("torch")


# A test that uses one of these fixtures, itself or through another fixture, gets the
# marker: how the tiers are chosen (`-m "not devstack"`), never written by hand.
FIXTURE_MARKERS = {
    "devstack": "devstack",
    "emulator": "emulator",
    "lepton_server": "emulator",
    "browser": "browser",
    "chromium": "browser",
    "torch": "torch",
    "spawns": "spawns",
}
# `scripts/test fast`: `-m fast`, the tests with none of these markers.
NOT_FAST = frozenset({"slow", *FIXTURE_MARKERS.values()})

inproc.install_guard()


@pytest.fixture(autouse=True)
def _fast_tests_start_no_process(request):
    """A test in the fast tier that starts a process (itself, or through the product)
    fails: it needs a fixture that says so (`cli`, `spawns`, ...), or to stay in-process."""
    inproc.take_spawned()
    yield
    started = inproc.take_spawned()
    if started and request.node.get_closest_marker("fast"):
        pytest.fail(
            f"this test started {len(started)} process(es) ({', '.join(started[:3])}) but is"
            " in the fast tier: use `cli` instead of `cli_inproc`, or request the `spawns`"
            " fixture",
            pytrace=False,
        )


_DIAGNOSIS_CORPUS = ROOT / "tests" / "diagnose"
_corpus_ran: list[bool] = []


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by these markers
def pytest_collection_modifyitems(items):
    for item in items:
        found = {FIXTURE_MARKERS[name] for name in item.fixturenames if name in FIXTURE_MARKERS}
        for marker in sorted(found):
            item.add_marker(marker)
        if not any(item.get_closest_marker(name) for name in NOT_FAST):
            item.add_marker("fast")
        if item.get_closest_marker("devstack"):
            # One Slurm cluster of two nodes, one emulator and one SkyPilot API server
            # serve the whole suite: with several workers (`-n 2 --dist loadgroup`) their
            # tests take turns in one worker, so no test waits out another's allocation.
            item.add_marker(pytest.mark.xdist_group("devstack"))


def pytest_collection_finish(session: pytest.Session) -> None:
    # pytest-xdist groups a test by renaming its id ("…@devstack"); pytest 9.2 builds ids
    # from the test's structured address, the rename is lost, and the devstack's tests ran
    # in both workers at once (a node set DOWN by one failed the other's job). Say so
    # rather than race (pyproject keeps pytest below 9.2 for this).
    if not session.config.getoption("loadgroup", default=False):
        return
    lost = [i.nodeid for i in session.items if i.get_closest_marker("xdist_group")]
    if lost and not all("@" in nodeid for nodeid in lost):
        raise pytest.UsageError(
            "pytest-xdist's --dist loadgroup has no effect with this pytest: the devstack's"
            f" tests would run at once in several workers (e.g. {lost[0]}); install"
            " pytest<9.2 or run with -n 0"
        )


_RELIABILITY: dict[str, Counter[str]] = {"figures": Counter(), "kinds": Counter()}
_RELIABILITY_ORDER: list[str] = []  # the order the suite promises its figures in


def pytest_runtest_logreport(report) -> None:
    # Seen where the summary is printed, also when workers (pytest-xdist) ran the tests.
    if report.when == "call" and report.nodeid.startswith("tests/diagnose/"):
        _corpus_ran.append(True)
    if report.when != "teardown":
        return
    for name, value in report.user_properties:  # tests/reliability/conftest.py
        if name != "reliability":
            continue
        figures = dict(value["figures"])
        for most in value["maxima"]:
            if most in figures:
                seen = _RELIABILITY["figures"]
                seen[most] = max(seen[most], figures.pop(most))
        _RELIABILITY["figures"].update(figures)
        _RELIABILITY["kinds"].update(value["kinds"])
        _RELIABILITY_ORDER[:] = value["order"]


def _reliability_line() -> str | None:
    """The reliability suite's figures, in the order it promises them."""
    figures, kinds = _RELIABILITY["figures"], _RELIABILITY["kinds"]
    if not figures or not _RELIABILITY_ORDER:
        return None
    order = _RELIABILITY_ORDER
    by_kind = ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items()))
    known = [
        f"{name} {figures[name]}"
        + (f" ({by_kind})" if name == "faults injected" and by_kind else "")
        for name in order
        if name in figures
    ]
    extra = [f"{name} {n}" for name, n in sorted(figures.items()) if name not in order]
    return ", ".join(known + extra)


def pytest_terminal_summary(terminalreporter):
    """The reliability suite's figures, and the diagnosis corpus' accuracy as one line,
    when their tests ran."""
    reliability = _reliability_line()
    if reliability:
        terminalreporter.write_sep("-", "reliability figures")
        terminalreporter.write_line(reliability)
    if _corpus_ran:
        from anylaunch.observe.diagnose import score

        cases = score.load(_DIAGNOSIS_CORPUS / "corpus")
        terminalreporter.write_line(score.score(cases).line())
        # The set no rule was tuned against (tests/diagnose/test_heldout.py).
        clear = score.score(score.load(_DIAGNOSIS_CORPUS / "heldout", clear_only=True))
        every = score.score(score.load(_DIAGNOSIS_CORPUS / "heldout"))
        terminalreporter.write_line(
            f"diagnosis held out, never tuned against: {clear.right}/{len(clear.cases)}"
            f" unambiguous right ({clear.accuracy:.1%}); {every.right}/{len(every.cases)}"
            f" with the ambiguous ({every.accuracy:.1%})"
        )
