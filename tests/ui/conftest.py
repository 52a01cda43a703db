"""Fixtures for the dashboard's tests: Debian's headless Chromium driven by Playwright,
and a real `anylaunch ui` server on a free loopback port over an isolated store.

Chromium missing: a skip when a developer runs pytest by hand, a failure under
scripts/test (ANYLAUNCH_REQUIRE_DEVSTACK=1), which installs it — like the devstack.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

# The flags Chromium needs on these machines: no sandbox as root, no GPU, and no
# background traffic to hosts this network refuses. Playwright adds --headless and a
# fresh --user-data-dir of its own.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SECRET = "hf_planted-Secret-7f3a9c"  # a value no page may ever show


def _missing(why: str) -> None:
    if os.environ.get("ANYLAUNCH_REQUIRE_DEVSTACK"):
        pytest.fail(f"{why} — scripts/test installs it")
    pytest.skip(why)


@pytest.fixture(scope="session")
def chromium() -> str:
    path = shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(path):
        _missing("Debian's chromium is not installed (apt-get install chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        _missing("playwright is not installed (pip install -e '.[test]')")
    return path


@pytest.fixture(scope="session")
def browser(chromium: str) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        launched = driver.chromium.launch(
            executable_path=chromium, headless=True, args=CHROMIUM_FLAGS
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    context.set_default_timeout(20_000)
    tab = context.new_page()
    yield tab
    context.close()


@dataclass
class Server:
    url: str  # as printed, with the token when there is one
    process: subprocess.Popen[str]

    @property
    def base(self) -> str:
        return self.url.split("?")[0].rstrip("/")


def start_ui(home: Path, *args: str, timeout: float = 30) -> Server:
    """`anylaunch ui --port 0 ARGS` as a user starts it, in the submitter's environment."""
    env = {**os.environ, "ANYLAUNCH_HOME": str(home), "HF_TOKEN": SECRET}
    process = subprocess.Popen(
        [sys.executable, "-m", "anylaunch", "ui", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(process.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    if not line or not line[0].startswith("anylaunch ui: http://"):
        process.kill()
        raise AssertionError(f"ui did not start: {line} {process.stderr.read()}")
    return Server(line[0].split(": ", 1)[1].strip(), process)


def stop(server: Server) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


@pytest.fixture(scope="session")
def ui_kit(spawns) -> SimpleNamespace:
    """The helpers tests need beyond fixtures (a server on a chosen address or store, the
    planted secret), handed over as a fixture: test modules never import conftest."""
    return SimpleNamespace(start=start_ui, stop=stop, secret=SECRET)


@pytest.fixture
def ui(home: Path, spawns) -> Iterator[Server]:
    """The dashboard on a free port of 127.0.0.1, over this test's store."""
    server = start_ui(home)
    yield server
    stop(server)


@pytest.fixture
def submit(cli, write):
    """Submit a job file on the local backend with `anylaunch run --detach --json`; jobs
    still running at the end of the test are cancelled."""
    submitted: list[str] = []

    def _submit(text: str, name: str = "job.yaml") -> dict:
        result = cli("run", str(write(text, name)), "--detach", "--json", env={"HF_TOKEN": SECRET})
        assert result.rc == 0, result.err
        submitted.append(result.json()["id"])
        return result.json()

    yield _submit
    if submitted:
        cli("cancel", *submitted)
