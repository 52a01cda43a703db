"""A job can write into its own folder, so it can plant links there: no reader of what a
job left (the dashboard's report downloads, job page and live log, `logs`, `logs -f`,
`status`, diagnosis) may follow one to a file outside the job's folder, nor open a FIFO
(it would hang) or a second name of another file (a hard link).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from reliability_helpers import FIGURES
from starlette.testclient import TestClient

from anylaunch import api
from anylaunch.observe import jobfiles
from anylaunch.observe.follow import follow
from anylaunch.observe.reports import profile_reports
from anylaunch.state import State
from anylaunch.store import JobRecord, Store
from anylaunch.ui.app import create_app
from anylaunch.ui.masking import Masker

OUTSIDE = "outside-file-the-job-must-not-read"


@contextmanager
def planted(kind: str) -> Iterator[tuple[api.Job, Path]]:
    """A finished local job whose log and one of its two reports are replaced by `kind`."""
    with tempfile.TemporaryDirectory() as tmp:
        outside = Path(tmp) / "shadow"
        outside.write_text(f"{OUTSIDE}\n")
        job_dir = Path(tmp) / "home" / "jobs" / "job00001"
        (job_dir / "logs").mkdir(parents=True)
        (job_dir / "nsys").mkdir()
        (job_dir / "nsys" / "a.nsys-rep").write_bytes(b"NSYS-real")
        log = job_dir / "logs" / "node-0.log"
        bad_report = job_dir / "nsys" / "x.nsys-rep"
        for target in (log, bad_report):
            plant(kind, target, outside, Path(tmp))
        store = Store(Path(tmp) / "home")
        plan = {
            "payload": {
                "nodes": [{"node_rank": 0, "log": str(log)}],
                "nsys_reports": "{job_dir}/nsys/*.nsys-rep",
            }
        }
        store.add(
            JobRecord(
                id="job00001", name="j", backend="local", state=State.FAILED, exit_code=1,
                job_dir=str(job_dir), plan=plan,
            )
        )  # fmt: skip
        try:
            yield api.get("job00001", store=store), job_dir
        finally:
            store.close()


def plant(kind: str, target: Path, outside: Path, tmp: Path) -> None:
    if kind == "symlink":
        target.symlink_to(outside)
    elif kind == "relative symlink":
        target.symlink_to(os.path.relpath(outside, target.parent))
    elif kind == "linked folder":  # the file is plain, the folder it sits in is a link
        elsewhere = tmp / f"elsewhere-{target.parent.name}"
        elsewhere.mkdir()
        (elsewhere / target.name).write_text(f"{OUTSIDE}\n")
        for item in target.parent.iterdir():
            (elsewhere / item.name).write_bytes(item.read_bytes())
            item.unlink()
        target.parent.rmdir()
        target.parent.symlink_to(elsewhere)
    elif kind == "hard link":
        os.link(outside, target)
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        raise AssertionError(kind)


KINDS = ["symlink", "relative symlink", "linked folder", "hard link", "fifo"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", KINDS)
def test_no_reader_of_a_jobs_folder_follows_a_planted_link(kind: str) -> None:
    with planted(kind) as (job, _):
        FIGURES["links tried"] += 1
        shown = [job.logs(), *follow(job), json.dumps(job.diagnose().to_json())]
        shown += profile_reports(job.record)
        app = create_app(Path(job._store.root), "action", Masker({}))
        with TestClient(app, base_url="http://127.0.0.1") as client:
            shown.append(client.get(f"/jobs/{job.id}").text)
            shown.append(client.get(f"/jobs/{job.id}/logs").text)
            for index in range(3):
                download = client.get(f"/jobs/{job.id}/reports/{index}")
                assert download.status_code in (200, 404)
                shown.append(download.text)
        assert not any(OUTSIDE in text for text in shown), kind
        if kind != "linked folder":  # there the real report sits behind the link too
            assert [Path(p).name for p in profile_reports(job.record)] == ["a.nsys-rep"]


def test_a_report_swapped_for_a_link_after_listing_is_not_served() -> None:
    """The link appears between the listing and the download: the open refuses it."""
    with planted("symlink") as (job, job_dir):
        FIGURES["links tried"] += 1
        app = create_app(Path(job._store.root), "action", Masker({}))
        real = job_dir / "nsys" / "a.nsys-rep"
        real.unlink()
        real.symlink_to(job_dir.parent.parent.parent / "shadow")
        with TestClient(app, base_url="http://127.0.0.1") as client:
            assert client.get(f"/jobs/{job.id}/reports/0").status_code == 404


@pytest.mark.parametrize("path", ["../shadow", "/etc/passwd", "logs/../../shadow", ""])
def test_a_path_outside_the_folder_is_refused(tmp_path: Path, path: str) -> None:
    FIGURES["links tried"] += 1
    (tmp_path / "job").mkdir()
    (tmp_path / "shadow").write_text(OUTSIDE)
    with pytest.raises(jobfiles.Refused):
        jobfiles.read_inside(str(tmp_path / "job"), path)


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_a_planted_result_file_neither_hangs_nor_misleads_ps(kind: str, tmp_path: Path) -> None:
    """A local job whose supervisor is gone, and whose folder holds a FIFO (a read would
    block for good) or a link to a forged result, in place of the supervisor's result."""
    from reliability_helpers import cli_env, count_tracebacks

    import inproc

    home = tmp_path / "home"
    store = Store(home)
    job_dir = store.jobs_dir("job00002")
    job_dir.mkdir(parents=True)
    forged = tmp_path / "forged.json"
    forged.write_text('{"state": "SUCCEEDED", "exit_code": 0}')
    if kind == "fifo":
        os.mkfifo(job_dir / "result.json")
    else:
        (job_dir / "result.json").symlink_to(forged)
    store.add(
        JobRecord(
            id="job00002", name="j", backend="local", state=State.RUNNING, job_dir=str(job_dir),
            native_id=str(2**22 + 4321), plan={"payload": {"nodes": []}},
        )
    )  # fmt: skip
    store.close()
    FIGURES["links tried"] += 1
    done = inproc.completed(("ps", "--json"), cli_env(home))
    assert count_tracebacks(done.stdout, done.stderr) == 0 and done.returncode == 0, done.stderr
    assert [j["state"] for j in json.loads(done.stdout)] == ["UNKNOWN"]
