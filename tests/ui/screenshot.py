"""Make docs/ui-job.png: the job page of the README's demo, as a user sees it.

    .venv/bin/python -m tests.ui.screenshot [OUT.png]

Runs examples/ddp_demo.py (2 nodes x 2 ranks on CPU, 60 steps, a fresh checkpoint
directory) in a throwaway ANYLAUNCH_HOME, serves it with `anylaunch ui`, and has Debian's
headless Chromium photograph the job page once the job has ended. Not a test: pytest
does not collect it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright
from tests.ui.conftest import CHROMIUM_FLAGS, start_ui, stop

ROOT = Path(__file__).resolve().parents[2]


def main(out: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix="ui-shot-"))
    home = work / "home"
    env = {**os.environ, "ANYLAUNCH_HOME": str(home), "CHECKPOINT_DIR": str(work / "ckpt")}
    subprocess.run(
        [sys.executable, "-m", "anylaunch", "run", str(ROOT / "examples" / "ddp_demo.yaml"),
         "--set", "command=python ddp_demo.py --steps 60", "--json"],
        env=env, check=True, stdout=subprocess.PIPE, timeout=300,
    )  # fmt: skip
    job_id = subprocess.run(
        [sys.executable, "-m", "anylaunch", "ps", "--json"],
        env=env, check=True, capture_output=True, text=True,
    ).stdout.split('"id": "')[1].split('"')[0]  # fmt: skip
    server = start_ui(home)
    try:
        with sync_playwright() as driver:
            browser = driver.chromium.launch(
                executable_path="/usr/bin/chromium", headless=True, args=CHROMIUM_FLAGS
            )
            page = browser.new_page(viewport={"width": 1280, "height": 1700})
            page.goto(f"{server.base}/jobs/{job_id}")
            page.locator("#log-status", has_text="complete").wait_for()
            page.locator("#log").evaluate("el => { el.scrollTop = el.scrollHeight; }")
            page.screenshot(path=str(out))
            browser.close()
    finally:
        stop(server)
    print(out)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "ui-job.png")
