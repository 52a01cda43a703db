"""The product's wheel carries no Lepton emulator: that is a distribution of its own
(emulator/, `anylaunch-lepton-emulator`), for tests and rehearsals only."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

# Every test here starts processes of its own.
pytestmark = pytest.mark.usefixtures("spawns")

ROOT = Path(__file__).resolve().parent.parent

# Run by the bare interpreter (-I -S: no site-packages, no .pth hooks, no PYTHONPATH) on
# the installed product alone, then with the project venv's site-packages appended for
# anylaunch's own dependencies. The venv's editable installs (anylaunch, the emulator)
# come in through .pth files, which an appended path does not run.
IMPORTS = textwrap.dedent(
    """
    import importlib, sys
    sys.path[:0] = [sys.argv[1]]
    sys.path += sys.argv[2:]
    import anylaunch
    print("anylaunch from", anylaunch.__file__)
    for name in ("anylaunch.lepton_emulator", "lepton_emulator"):
        try:
            importlib.import_module(name)
            print(name, "imported")
        except ModuleNotFoundError as exc:
            print(name, "missing", exc.name)
    """
)


@pytest.fixture(scope="module")
def product_wheel(tmp_path_factory) -> Path:
    """The wheel `pip install .` builds, made from a copy of what it is built from: an
    in-tree build would reuse whatever an earlier build left in build/."""
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("wheel")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "src", source / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__")
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "--disable-pip-version-check", "-w", str(out), str(source)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (wheel,) = out.glob("anylaunch-*.whl")
    return wheel


def test_the_product_wheel_has_no_emulator_files_and_no_emulator_command(product_wheel):
    names = zipfile.ZipFile(product_wheel).namelist()
    assert "anylaunch/cli/__init__.py" in names  # the wheel holds the product
    assert not [n for n in names if "emulator" in n.lower()]
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(product_wheel).read(entry_points).decode()
    assert "anylaunch =" in text and "emulator" not in text
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    extras = [
        line
        for line in zipfile.ZipFile(product_wheel).read(metadata).decode().splitlines()
        if line.startswith(("Provides-Extra:", "Requires-Dist:"))
    ]
    assert extras and not [line for line in extras if "emulator" in line]


def test_after_installing_the_product_alone_neither_emulator_module_imports(
    product_wheel, tmp_path
):
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
         "--disable-pip-version-check", "--target", str(target), str(product_wheel)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    venv_site = [p for p in sys.path if p.endswith("site-packages")]
    base = getattr(sys, "_base_executable", sys.executable)
    proc = subprocess.run(
        [base, "-I", "-S", "-c", IMPORTS, str(target), *venv_site],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"anylaunch from {target}" in proc.stdout  # the installed wheel, not the checkout
    assert "anylaunch.lepton_emulator missing anylaunch.lepton_emulator" in proc.stdout
    assert "lepton_emulator missing lepton_emulator" in proc.stdout


def test_the_emulator_imports_nothing_of_anylaunch():
    code = (
        "import sys, lepton_emulator.cli, lepton_emulator.server, lepton_emulator.images\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'anylaunch'))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert proc.stdout.strip() == "[]"


def test_the_emulator_is_its_own_command_and_no_longer_an_anylaunch_one(cli):
    command = Path(sys.executable).parent / "lepton-emulator"
    shown = subprocess.run([str(command), "--help"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "--outside" in shown.stdout
    gone = cli("lepton-emulator", "--help")
    assert gone.rc == 2 and "No such command 'lepton-emulator'" in gone.err
