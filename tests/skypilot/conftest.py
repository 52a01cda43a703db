"""SkyPilot test fixtures: AutoModel's spot job file, and the devstack's SkyPilot client."""

from __future__ import annotations

import importlib.util
import os
import secrets
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from automodel_docs import SKYPILOT_BLOCK, SPOT_RECIPE

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE / "programs"
ROOT = HERE.parent.parent

# AutoModel's documented spot example: the skypilot: block and the minimal resume recipe
# keys it recommends with it.
AUTOMODEL_SPOT = (
    "name: llm_finetune\n"
    "command: python -m nemo_automodel.recipes.llm.train_ft -c {config}\n"
    + SKYPILOT_BLOCK
    + SPOT_RECIPE
)

# Everything except loopback goes to a dead port: a test that reaches the internet fails.
OFFLINE = {
    "http_proxy": "http://127.0.0.1:9",
    "https_proxy": "http://127.0.0.1:9",
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "no_proxy": "localhost,127.0.0.1",
    "NO_PROXY": "localhost,127.0.0.1",
    "SKYPILOT_DISABLE_USAGE_COLLECTION": "1",
}


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a long end-to-end test (2-node SkyPilot on Slurm)")


@pytest.fixture
def automodel_spot(write):
    return write(AUTOMODEL_SPOT, "spot.yaml")


@pytest.fixture(scope="session")
def _sky_session_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("skyhome")


@pytest.fixture(autouse=True)
def sky_home(_sky_session_home, monkeypatch) -> Path:
    """SkyPilot writes ~/.sky on import and binds its paths then: every test here runs
    with a throw-away HOME (one per session, as the module is imported once) and with
    the network out of reach."""
    monkeypatch.setenv("HOME", str(_sky_session_home))
    for key, value in OFFLINE.items():
        monkeypatch.setenv(key, value)
    return _sky_session_home


# Import-free check: importing SkyPilot here would bind it to the developer's HOME.
needs_sky = pytest.mark.skipif(
    importlib.util.find_spec("sky") is None,
    reason="SkyPilot is not installed (anylaunch[skypilot])",
)


@pytest.fixture(scope="session")
def skystack(devstack) -> dict[str, str]:
    """The devstack's SkyPilot client settings (API server, HOME, offline guard)."""
    if devstack.get("DEVSTACK_SKY_UNAVAILABLE"):
        pytest.fail(f"SkyPilot devstack unavailable: {devstack['DEVSTACK_SKY_UNAVAILABLE']}")
    if "DEVSTACK_SKY_HOME" not in devstack:
        if os.environ.get("ANYLAUNCH_REQUIRE_DEVSTACK"):
            pytest.fail("the devstack has no skypilot service: scripts/devstack up")
        pytest.skip("the devstack has no skypilot service (scripts/devstack up)")
    return {
        **devstack,
        **OFFLINE,
        "HOME": devstack["DEVSTACK_SKY_HOME"],
        "SKYPILOT_API_SERVER_LOCAL_PORT": devstack["DEVSTACK_SKY_API_PORT"],
    }


def cluster_name_on_cloud(stack: dict[str, str], name: str) -> str:
    code = (
        "from sky.utils import common_utils;"
        f"print(common_utils.make_cluster_name_on_cloud({name!r}, 120))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, **stack}, capture_output=True, text=True
    )
    return out.stdout.strip()


def offline_uv(stack: dict[str, str], cluster: str) -> None:
    """SkyPilot's node runtime curls uv from astral.sh unless the cluster's HOME has it,
    and the devstack's nodes have no internet; place it before each launch."""
    home = (
        Path(stack["DEVSTACK_SKY_WORKDIR"])
        / ".sky_clusters"
        / cluster_name_on_cloud(stack, cluster)
    )
    (home / ".local" / "bin").mkdir(parents=True, exist_ok=True)
    shutil.copy2(stack["DEVSTACK_SKY_UV"], home / ".local" / "bin" / "uv")


@pytest.fixture
def cluster(skystack):
    """A fresh SkyPilot cluster name, torn down (`sky down`) after the test."""
    name = f"al-e2e-{secrets.token_hex(3)}"
    offline_uv(skystack, name)
    yield name
    subprocess.run(
        [str(Path(sys.executable).parent / "sky"), "down", "-y", name],
        env={**os.environ, **skystack},
        capture_output=True,
        timeout=120,
    )


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip()
