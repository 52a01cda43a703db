"""Masking holds at any offset and any chunk boundary, for every reader of a job's log:
the dashboard's live stream resumed from a Last-Event-ID the client chose, `logs`
(whole or `--tail`), `logs -f` over a log that grows in arbitrary pieces, and diagnosis.

The secret is drawn from capital letters and the rest of the log from everything else,
so a single character of the secret in the output is a hit: a read that starts inside
the token (it used to return all of it but its first character) cannot pass unseen.
"""

from __future__ import annotations

import json
import os
import string
import tempfile
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st
from reliability_helpers import FIGURES

from anylaunch import api
from anylaunch.backends.base import LogSource
from anylaunch.observe import logfile
from anylaunch.observe.logfile import Offsets
from anylaunch.state import State
from anylaunch.store import JobRecord, Store

SECRET_CHARS = string.ascii_uppercase
OTHER = string.ascii_lowercase + string.digits + " =:;-_/.\t\u00e9\u4e2d"

secrets_ = st.text(SECRET_CHARS, min_size=6, max_size=40) | st.builds(
    lambda a, b: f"{a}\n{b}",  # a value that spans lines (a PEM key)
    st.text(SECRET_CHARS, min_size=6, max_size=20),
    st.text(SECRET_CHARS, min_size=6, max_size=20),
)


@st.composite
def logs(draw) -> tuple[str, bytes]:
    """A secret and a log that prints it, whole, among other lines."""
    secret = draw(secrets_)
    pieces = draw(
        st.lists(st.text(OTHER, max_size=30) | st.just("\n") | st.just("token="), max_size=12)
    )
    at = sorted(draw(st.lists(st.integers(0, len(pieces)), min_size=1, max_size=4)))
    for index in reversed(at):
        pieces.insert(index, secret)
    return secret, "".join(pieces).encode()


def leaked(texts: list[str]) -> list[str]:
    return [t for t in texts if any(c in SECRET_CHARS for c in t)]


@contextmanager
def job_with_log(data: bytes, secret: str):
    """A finished local job in a fresh store whose node-0 log holds `data`; the secret
    is in this process's environment under a name the plan marks as a secret."""
    with tempfile.TemporaryDirectory() as tmp:
        job_dir = Path(tmp) / "home" / "jobs" / "job00001"
        (job_dir / "logs").mkdir(parents=True)
        log = job_dir / "logs" / "node-0.log"
        log.write_bytes(data)
        store = Store(Path(tmp) / "home")
        plan = {"payload": {"nodes": [{"node_rank": 0, "log": str(log)}]}, "secret_env": ["KEY"]}
        store.add(
            JobRecord(
                id="job00001", name="j", backend="local", state=State.SUCCEEDED,
                job_dir=str(job_dir), plan=plan,
            )
        )  # fmt: skip
        try:
            env = {"KEY": secret, "ANYLAUNCH_HOME": str(Path(tmp) / "home")}
            with mock.patch.dict(os.environ, env):
                yield api.get("job00001", store=store), log
        finally:
            store.close()


@settings(max_examples=300, deadline=None)
@given(logs(), st.lists(st.integers(0, 400), min_size=1, max_size=5), st.booleans())
def test_live_stream_resumed_at_any_offset_shows_no_part_of_a_secret(
    case: tuple[str, bytes], offsets: list[int], final: bool
) -> None:
    secret, data = case
    from anylaunch.ui.masking import Masker

    masker = Masker({"HF_TOKEN": secret})
    with tempfile.TemporaryDirectory() as root:
        log = Path(root) / "node-0.log"
        log.write_bytes(data)
        source = LogSource(node=0, path=str(log))
        shown = []
        for offset in offsets:  # each one a reconnect with a Last-Event-ID the client chose
            FIGURES["offsets tried"] += 1
            reader = Offsets.parse(f"0:{offset % (len(data) + 2)}")
            shown += [masker.text(line) for line in reader.read(source, root, final)]
    assert leaked(shown) == []


@settings(max_examples=300, deadline=None)
@given(logs(), st.lists(st.integers(1, 50), min_size=1, max_size=30), st.integers(0, 10**6))
def test_a_log_read_while_it_grows_in_any_pieces_shows_no_part_of_a_secret(
    case: tuple[str, bytes], cuts: list[int], start: int
) -> None:
    """What `logs -f` and the live stream do: read, the file grows by an arbitrary piece
    (a cut may fall inside the token or inside a UTF-8 character), read on."""
    secret, data = case
    secrets = {secret, *secret.splitlines()}
    with tempfile.TemporaryDirectory() as root:
        log = Path(root) / "node-0.log"
        log.write_bytes(b"")
        source = LogSource(node=0, path=str(log))
        offset: int | None = start % (len(data) + 1) if start % 3 == 0 else None
        shown, written = [], 0
        for cut in [*cuts, len(data)]:
            piece = data[written : written + cut]
            written += len(piece)
            with log.open("ab") as handle:
                handle.write(piece)
            FIGURES["offsets tried"] += 1
            chunk = logfile.read(source, root, offset, final=written >= len(data))
            offset = chunk.end
            shown += logfile.masked(chunk.lines, secrets)
        text = LogSource(node=0, text=data.decode("utf-8", errors="replace"))
        for at in (0, 1, start % (len(data) + 1)):  # a backend's text, from any offset
            FIGURES["offsets tried"] += 1
            shown += logfile.masked(logfile.read(text, root, at).lines, secrets)
    assert leaked(shown) == []


@settings(max_examples=100, deadline=None)
@given(logs(), st.integers(-1, 30), st.integers(0, 500))
def test_logs_tail_since_and_diagnosis_show_no_part_of_a_secret(
    case: tuple[str, bytes], tail: int, since: int
) -> None:
    """`logs` (the API's `Job.logs`), `logs --tail`, `logs -f`, `logs --since` and the
    MCP tool (`commands.logs`: the masked whole, then sliced at any offset), diagnosis."""
    from anylaunch.contract import commands
    from anylaunch.contract.inputs import LogsArgs
    from anylaunch.observe.follow import follow

    secret, data = case
    with job_with_log(data, secret) as (job, _):
        FIGURES["offsets tried"] += 2
        shown = job.logs(tail=None if tail < 0 else tail).splitlines()
        shown += list(follow(job, tail=None if tail < 0 else tail))
        # The lines diagnosis quotes (its other fields are ours: which rule, which emitter).
        shown += [item["text"] for item in job.diagnose().to_json()["evidence"]]
        args = LogsArgs(job_id=job.id, tail=None if tail < 0 else tail, since=since)
        shown += [commands.logs(args)["text"]]
    assert leaked(shown) == []


def test_the_dashboard_stream_resumed_inside_the_token_sends_none_of_it() -> None:
    """The probe's own repro, through the real app: `Last-Event-ID: 0:N` for every N."""
    from starlette.testclient import TestClient

    from anylaunch.ui.app import create_app
    from anylaunch.ui.masking import Masker

    secret = "QWERTYUIOPASDFGHJKLZXCVBNM"
    data = f"starting\nconfig: token={secret}\nstep 1 loss 0.5\n".encode()
    with job_with_log(data, secret) as (job, _):
        app = create_app(Path(job._store.root), "action", Masker({"HF_TOKEN": secret}))
        shown = []
        with TestClient(app, base_url="http://127.0.0.1") as client:
            for offset in range(len(data) + 2):
                FIGURES["offsets tried"] += 1
                response = client.get(
                    f"/jobs/{job.id}/logs", headers={"Last-Event-ID": f"0:{offset}"}
                )
                for block in response.text.split("\n\n"):
                    if "event: lines" in block:
                        payload = block.split("data: ", 1)[1]
                        shown += [item["text"] for item in json.loads(payload)]
        assert "step 1 loss 0.5" in shown and "config: token=***" in shown
    assert leaked(shown) == []


def test_a_last_event_id_of_any_size_or_digit_resumes_from_the_start() -> None:
    """A resume point past Python's int-from-text limit (4,300 digits), or written in
    other scripts' digits, is a hint that does not parse: the stream starts over."""
    from starlette.testclient import TestClient

    from anylaunch.ui.app import create_app
    from anylaunch.ui.masking import Masker

    data = b"first line\nsecond line\n"
    with job_with_log(data, "QWERTYUIOP") as (job, _):
        app = create_app(Path(job._store.root), "action", Masker({}))
        with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as client:
            # Headers arrive as latin-1: "\xb2" is a superscript two, a digit to str.isdigit.
            for token in ("0:" + "9" * 5000, "9" * 5000 + ":0", "0:\xb2", "\xb2:0"):
                FIGURES["offsets tried"] += 1
                FIGURES["hostile inputs"] += 1
                headers = {"Last-Event-ID": token.encode("latin-1")}
                response = client.get(f"/jobs/{job.id}/logs", headers=headers)
                assert response.status_code == 200, response.text[:500]
                assert "first line" in response.text and "second line" in response.text
