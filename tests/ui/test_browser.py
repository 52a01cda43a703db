"""The dashboard in a real browser (Debian's headless Chromium) against a live server and
real jobs on the local backend: the list, streaming logs, cancel, retry, and secrets."""

from __future__ import annotations

import html
import re
import sys
import time

from playwright.sync_api import expect

# A training-like program: prints its step and loss, and (carelessly) its token.
TRAINER = f"""
name: trainer
launcher: none
nodes: 2
env:
  HF_TOKEN: ${{HF_TOKEN}}
command:
  - {sys.executable}
  - -c
  - |
    import os, sys, time
    print("token=" + os.environ["HF_TOKEN"], flush=True)
    for step in range(1, 600):
        print(f"step {{step}} loss {{1.0 / step:.4f}}", flush=True)
        time.sleep(0.2)
"""


def _steps(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"step (\d+) loss", text)]


def test_list_shows_the_submitted_job_and_its_logs_stream_in(ui, page, submit):
    page.goto(ui.url)
    expect(page.locator("p.empty")).to_contain_text("No jobs")
    job = submit(TRAINER)
    row = page.locator(f'tr[data-job-id="{job["id"]}"]')
    row.wait_for()  # the list refreshes itself: no reload
    assert "trainer" in row.inner_text() and "local" in row.inner_text()

    row.locator("a").first.click()
    page.wait_for_url(f"**/jobs/{job['id']}")
    log = page.locator("#log")
    expect(log).to_contain_text("step 3 loss")
    first = max(_steps(log.inner_text()))
    # Lines keep arriving without a reload: the page follows the running job.
    expect(log).to_contain_text(f"step {first + 5} loss", timeout=15_000)
    assert "[node 1]" in log.inner_text()  # every node's log, in one stream
    page.locator('.tabs button[data-node="1"]').click()
    assert page.locator('#log div[data-node="0"]').first.is_hidden()
    assert page.locator("#state").inner_text() == "RUNNING"
    assert page.locator("svg.timeline rect.seg").count() >= 2
    page.wait_for_selector("svg.curve polyline")  # the loss curve, redrawn while it runs


def test_cancel_from_the_job_page_stops_the_job(ui, page, submit, cli):
    job = submit(TRAINER)
    page.goto(f"{ui.base}/jobs/{job['id']}")
    expect(page.locator("#log")).to_contain_text("step 1 loss")
    asked = []
    page.on("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    page.get_by_role("button", name="Cancel job").click()
    expect(page.locator("#state")).to_have_text("CANCELLED", timeout=30_000)
    assert asked and job["id"] in asked[0]  # it asked first
    assert cli("status", job["id"], "--json").json()["state"] == "CANCELLED"
    expect(page.locator(".diagnosis h2")).to_contain_text("Diagnosis: CANCELLED")
    assert page.get_by_role("button", name="Cancel job").count() == 0


def test_declining_the_confirmation_cancels_nothing(ui, page, submit, cli):
    job = submit(TRAINER)
    page.goto(f"{ui.base}/jobs/{job['id']}")
    page.on("dialog", lambda dialog: dialog.dismiss())
    page.get_by_role("button", name="Cancel job").click()
    time.sleep(1.0)
    assert cli("status", job["id"], "--json").json()["state"] in ("STARTING", "RUNNING")


def test_a_planted_secret_never_reaches_the_page(ui, page, submit, home, ui_kit):
    job = submit(TRAINER)
    page.goto(f"{ui.base}/jobs/{job['id']}")
    expect(page.locator("#log")).to_contain_text("step 2 loss")
    log_file = home / "jobs" / job["id"] / "logs" / "node-0.log"
    assert ui_kit.secret in log_file.read_text()  # the program did print it: masking is needed
    assert "token=***" in page.locator("#log").inner_text()
    seen = {"job page (live DOM)": page.content()}
    page.goto(ui.url)
    page.locator(f'tr[data-job-id="{job["id"]}"]').wait_for()
    seen["list (live DOM)"] = page.content()
    page.request.post(
        f"{ui.base}/jobs/{job['id']}/cancel",
        headers={"x-anylaunch-action": _action_token(page)},
    )
    for path in ("/", "/fragments/lists", f"/jobs/{job['id']}", f"/jobs/{job['id']}/curve"):
        seen[path] = page.request.get(ui.base + path).text()
    seen["log stream"] = page.request.get(f"{ui.base}/jobs/{job['id']}/logs").text()
    assert "token=***" in seen["log stream"]
    for where, text in seen.items():
        assert ui_kit.secret not in text, where
    assert '"HF_TOKEN": "***"' in html.unescape(seen[f"/jobs/{job['id']}"])  # the spec, masked


def _action_token(page) -> str:
    return page.locator('meta[name="anylaunch-action"]').get_attribute("content")


def test_run_grid_shows_splits_by_state_and_retry_resubmits_only_the_failed(ui, page, cli, write):
    path = write(
        f"""
        name: sweep
        launcher: none
        splits: 3
        command: [{sys.executable}, -c, "import os, sys; sys.exit(1 if os.environ['SPLIT_ID'] == '1' and os.environ['ANYLAUNCH_ATTEMPT'] == '1' else 0)"]
        """
    )
    result = cli("run", str(path), "--json")
    run_id = result.json()["id"]
    assert result.rc == 1  # split 1 failed
    page.goto(ui.url)
    page.locator(f'tr[data-run-id="{run_id}"]').get_by_role("link").click()
    page.wait_for_url(f"**/runs/{run_id}")
    cells = page.locator(".grid .cell")
    assert [cells.nth(i).get_attribute("data-state") for i in range(3)] == [
        "SUCCEEDED",
        "FAILED",
        "SUCCEEDED",
    ]
    page.on("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name=re.compile("Retry failed splits")).click()
    expect(page.locator('.cell[data-split="1"]')).to_have_attribute(
        "data-state", "SUCCEEDED", timeout=30_000
    )
    assert "×2" in page.locator('.cell[data-split="1"]').inner_text()
    status = cli("status", run_id, "--json").json()
    assert [len(s["attempts"]) for s in status["splits"]] == [1, 2, 1]
    assert page.locator("svg.timeline rect.seg").count() >= 4  # one lane per attempt


def test_a_failed_job_shows_its_diagnosis_and_evidence(ui, page, cli, write):
    path = write(
        f"""
        name: oom
        launcher: none
        command: [{sys.executable}, -c, "import sys; print('step 1 loss 2.5'); print('torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.'); sys.exit(1)"]
        """
    )
    job = cli("run", str(path), "--json").json()
    page.goto(f"{ui.base}/jobs/{job['id']}")
    expect(page.locator(".diagnosis h2")).to_contain_text("OOM_GPU")
    expect(page.locator(".diagnosis table.evidence")).to_contain_text("CUDA out of memory")
    expect(page.locator("#log")).to_contain_text("Tried to allocate")
