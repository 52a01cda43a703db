"""The dashboard's parts without a browser: progress parsing, plots, log offsets, masking."""

from __future__ import annotations

from pathlib import Path

from anylaunch.backends.base import LogSource
from anylaunch.observe.logfile import Offsets
from anylaunch.ui import metrics, plots
from anylaunch.ui.live import TAIL_BYTES
from anylaunch.ui.masking import Masker


def test_progress_is_read_from_the_shapes_programs_print():
    text = "\n".join(
        [
            "rank=0 world_size=4",
            "step 1 loss 0.9000",  # examples/ddp_demo.py
            "step: 2/10, loss=0.5",
            "{'loss': 0.25, 'global_step': 3}",
            "epoch 1 train_loss 0.2 step 4",
            "nothing here",
        ]
    )
    progress = metrics.parse(text)
    assert [(p.step, p.loss) for p in progress.points] == [
        (1, 0.9),
        (2, 0.5),
        (3, 0.25),
        (4, 0.2),
    ]
    assert progress.total_steps == 10 and progress.last_step == 4


def test_a_curve_only_when_there_is_something_to_draw():
    assert plots.curve(metrics.parse("hello\nworld")) == ""
    assert plots.curve(metrics.parse("step 1 loss 2.0")) == ""  # one point is no curve
    svg = plots.curve(metrics.parse("\n".join(f"step {i} loss {1 / i}" for i in range(1, 50))))
    assert 'aria-label="loss curve"' in svg and 'data-points="49"' in svg
    steps = plots.curve(metrics.parse("step 1\nstep 2\nstep 3"))
    assert 'aria-label="step curve"' in steps
    many = metrics.parse("\n".join(f"step {i} loss 1" for i in range(5000)))
    assert len(many.points) == metrics.MAX_POINTS and many.points[-1].step == 4999


def test_timeline_draws_states_and_marks_a_resubmission():
    events = [
        {"at": 100.0, "state": "PENDING", "detail": "recorded"},
        {"at": 101.0, "state": "RUNNING", "detail": None},
        {"at": 150.0, "state": "RUNNING", "detail": "evicted; resubmitted <attempt 2>"},
        {"at": 200.0, "state": "SUCCEEDED", "detail": None},
    ]
    svg = plots.timeline([plots.lane("job1", events, live=False)])
    assert svg.count('<rect class="seg') == 4 and svg.count('class="attempt"') == 1
    assert "&lt;attempt 2&gt;" in svg and "<attempt" not in svg  # details are escaped
    assert "+1 m 40 s" in svg
    assert plots.timeline([]) == ""


def test_log_offsets_advance_over_complete_lines_and_resume(tmp_path: Path):
    log = tmp_path / "node-0.log"
    log.write_bytes(b"one\ntwo\nthr")
    source = LogSource(node=0, path=str(log))
    offsets = Offsets()
    assert offsets.read(source, str(tmp_path), final=False) == ["one", "two"]
    with log.open("ab") as handle:
        handle.write(b"ee\nfour")
    resumed = Offsets.parse(offsets.token())  # a browser reconnecting with Last-Event-ID
    assert resumed.read(source, str(tmp_path), final=False) == ["three"]
    assert resumed.read(source, str(tmp_path), final=True) == ["four"]
    assert resumed.read(source, str(tmp_path), final=True) == []


def test_an_offset_is_the_same_byte_for_a_log_file_and_for_text_fetched_from_a_backend(
    tmp_path: Path,
):
    text = "é中 one\nzwei ü\ndrei"  # multi-byte characters: characters and bytes differ
    log = tmp_path / "node-0.log"
    log.write_bytes(text.encode())
    from_file, from_text = Offsets(), Offsets()
    file_lines = from_file.read(LogSource(node=0, path=str(log)), str(tmp_path), final=False)
    text_lines = from_text.read(LogSource(node=0, text=text), str(tmp_path), final=False)
    assert file_lines == text_lines == ["é中 one", "zwei ü"]
    two_lines = len("é中 one\nzwei ü\n".encode())  # 18 bytes, 14 characters
    assert from_file.token() == from_text.token() == f"0:{two_lines}"
    # A reader resumed from either token gets the same rest from either source.
    for source in (LogSource(node=0, path=str(log)), LogSource(node=0, text=text)):
        assert Offsets.parse(from_text.token()).read(source, str(tmp_path), final=True) == ["drei"]


def test_a_new_viewer_gets_the_end_of_a_long_log_from_a_line_start(tmp_path: Path):
    log = tmp_path / "node-0.log"
    lines = [f"line {i:07d}" for i in range(60_000)]  # ~780 KB
    log.write_text("\n".join(lines) + "\n")
    got = Offsets().read(
        LogSource(node=0, path=str(log)), str(tmp_path), final=False, tail_bytes=TAIL_BYTES
    )
    assert got[-1] == lines[-1] and got[0] in lines and len("\n".join(got)) <= TAIL_BYTES


def test_masker_hides_secret_values_in_every_spelling():
    masker = Masker({"HF_TOKEN": "ab\"c<d>&e'f", "MY_PLAIN_VAR": "plain-value", "HOME": "/root"})
    raw = "token ab\"c<d>&e'f"
    assert masker.text(raw) == "token ***"
    assert masker.text("ab&#34;c&lt;d&gt;&amp;e&#39;f") == "***"  # markupsafe's escaping
    assert masker.text("ab&quot;c&lt;d&gt;&amp;e&#x27;f") == "***"  # html.escape's
    assert masker.text("plain-value") == "plain-value"  # not a secret's name
    assert masker.text("plain-value", ["MY_PLAIN_VAR"]) == "***"  # named secret by the plan
    assert masker.data({"env": ["x ab\"c<d>&e'f"]}) == {"env": ["x ***"]}


def test_a_backend_that_cannot_be_polled_leaves_the_list_standing(tmp_path: Path):
    from anylaunch.state import State
    from anylaunch.store import JobRecord, Store
    from anylaunch.ui import lists

    store = Store(tmp_path)
    store.add_many(
        [
            JobRecord(id="gone0001", name="a", backend="nowhere", state=State.RUNNING, job_dir="x"),
            JobRecord(id="done0001", name="b", backend="local", state=State.SUCCEEDED, job_dir="y"),
        ]
    )
    page = lists.front_page(store, lists.Filters())
    assert sorted(r.id for r in page.jobs) == ["done0001", "gone0001"]
    assert "not available" in page.problems["nowhere"]


def test_job_page_lists_nsys_reports_and_serves_only_those(tmp_path: Path, ui_kit):
    import httpx

    from anylaunch.state import State
    from anylaunch.store import JobRecord, Store

    reports = tmp_path / "nsys"
    reports.mkdir()
    (reports / "rank0.nsys-rep").write_bytes(b"NSYS")
    store = Store(tmp_path / "home")
    plan = {"payload": {"nodes": [], "nsys_reports": f"{reports}/*.nsys-rep"}}
    record = JobRecord(
        id="prof0001", name="p", backend="local", state=State.SUCCEEDED, job_dir="x", plan=plan
    )
    store.add(record)
    server = ui_kit.start(tmp_path / "home")
    try:
        page = httpx.get(f"{server.base}/jobs/prof0001").text
        assert "Nsight Systems reports" in page and "rank0.nsys-rep" in page
        download = httpx.get(f"{server.base}/jobs/prof0001/reports/0")
        assert download.status_code == 200 and download.content == b"NSYS"
        assert httpx.get(f"{server.base}/jobs/prof0001/reports/1").status_code == 404
    finally:
        ui_kit.stop(server)


def test_job_page_shows_every_attempt_with_its_diagnosis_and_why_the_next_was_made(
    tmp_path: Path, ui_kit
):
    import httpx

    from anylaunch.state import State
    from anylaunch.store import JobRecord, Store

    store = Store(tmp_path / "home")
    store.add(JobRecord(id="again001", name="r", backend="local", state=State.RUNNING, job_dir="x"))
    diagnosis = {"code": "NCCL_TIMEOUT", "node": None}
    why = "NCCL_TIMEOUT is retried (retry.on: the retryable classes): attempt 2 of 3"
    store.end_attempt("again001", 1, diagnosis=diagnosis, next_reason=why, state=State.FAILED)
    assert store.begin_attempt("again001", 2, {}, avoided=[], detail="attempt 2")
    store.transition("again001", State.SUCCEEDED, exit_code=0)
    server = ui_kit.start(tmp_path / "home")
    try:
        page = httpx.get(f"{server.base}/jobs/again001").text
        attempts = page.split("<h2>Attempts</h2>", 1)[1].split("</table>", 1)[0]
        assert "NCCL_TIMEOUT" in attempts and "attempt 2 of 3" in attempts
        assert attempts.count("<tr><td>") == 2 and "st-SUCCEEDED" in attempts
    finally:
        ui_kit.stop(server)
