"""Lepton (emulated workspace): submitting 100 jobs, and the API calls of one status poll.

What users do instead: the leptonai SDK (and NeMo-Run, TAO SDK on top of it) creates
jobs one `create_job` after another and reads status with one `get_job` per job. Both
are timed here against the same emulator, interleaved with anylaunch, which submits the
splits of a run with bounded concurrency and polls every tracked job from one paginated
list.
"""

from __future__ import annotations

import inspect
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from anylaunch import api, config, splits
from anylaunch.spec import JobSpec
from anylaunch.state import State
from anylaunch.store import JobRecord, Store, new_id
from bench.common import Row, failed, interleaved, median_ms, ms
from bench.emulator import PrivateEmulator, counting_http

GROUP_SUBMIT = "submit"
GROUP_POLL = "status poll"
# The usual TAO-on-Lepton job: a GPU count, no explicit shape (resolved from the workspace).
JOB = "name: bench-lepton\ncommand: python train.py\nimage: pytorch/pytorch:2.5.1\ngpus_per_node: 8\nlepton: {}\n"
PARALLEL = 8
RTTS = (0.0, 0.05)  # loopback, and a simulated 50 ms to a real gateway
SPLITS = 100
SIZES = (1, 100, 1000)


def run(rounds: int = 3) -> list[Row]:
    """Submission in one fresh workspace, polling in another that holds just the 1,000
    jobs polled: a poll lists the workspace until it has seen every tracked job, so its
    cost depends on how many jobs are listed before them (see the rows' note)."""
    saved = {k: os.environ.get(k) for k in ("LEPTON_WORKSPACE_URL", "LEPTON_WORKSPACE_ID",
                                             "LEPTON_AUTH_TOKEN", "NGC_KEY")}  # fmt: skip
    os.environ.pop("NGC_KEY", None)
    rows: list[Row] = []
    try:
        with _workspace() as (spec, store, http):
            for rtt in RTTS:
                try:
                    rows.append(_submit(spec, store, http, rounds, rtt))
                except Exception as exc:
                    rows.append(failed(GROUP_SUBMIT, f"Lepton: {SPLITS} jobs", "", exc))
        with _workspace() as (spec, store, http):
            try:
                rows += _poll(spec, store, http, rounds)
            except Exception as exc:
                rows.append(failed(GROUP_POLL, "Lepton", "≤ 2 calls", exc))
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return rows


@contextmanager
def _workspace() -> Iterator[tuple[JobSpec, Store, httpx.Client]]:
    """A private emulator, the client settings pointing at it, a store and a raw client."""
    home = Path(tempfile.mkdtemp(prefix="bench-lepton-"))
    with PrivateEmulator() as emulator:
        os.environ.update(emulator.env())
        store = Store(home)
        http = httpx.Client(
            base_url=emulator.url,
            headers={"Authorization": f"Bearer {emulator.token}"},
            timeout=30,
        )
        try:
            yield config.from_text(JOB, file=str(home / "job.yaml")), store, http
        finally:
            http.close()
            store.close()
            shutil.rmtree(home, ignore_errors=True)


def _launch(spec: JobSpec, store: Store) -> list[str]:
    """The splits through anylaunch's own bounded-concurrency path (or a pool like it)."""
    if "max_parallel" in inspect.signature(splits.launch).parameters:
        run_ = splits.launch(spec, SPLITS, "lepton", store=store, max_parallel=PARALLEL)
        return [job.id for job in run_.jobs]
    run_id = new_id()
    with ThreadPoolExecutor(PARALLEL) as pool:  # before splits.launch had max_parallel

        def one(i: int) -> str:
            own = Store(store.root)
            try:
                split = splits.with_split(spec, i)
                return api.submit(split, "lepton", store=own, run_id=run_id, split_id=i).id
            finally:
                own.close()

        return list(pool.map(one, range(SPLITS)))


def _submit(spec: JobSpec, store: Store, http: httpx.Client, rounds: int, rtt: float) -> Row:
    """100 splits, bounded concurrency, vs 100 serial creates of the same bodies; both
    with the same simulated round trip per request."""
    bodies = [
        [
            api.dry_run(splits.with_split(spec, i), "lepton", store=store).payload
            for i in range(SPLITS)
        ]
        for _ in range(rounds)
    ]
    counted: list[Counter[str]] = []

    def ours() -> None:
        with counting_http(rtt) as calls:
            _launch(spec, store)
        counted.append(calls)

    def serial() -> None:
        with counting_http(rtt):
            for body in bodies.pop():
                created = http.post("/jobs", json=body)
                created.raise_for_status()
                _track(store, created.json()["metadata"]["id"])

    samples = interleaved({"ours": ours, "serial": serial}, rounds, warmup=0)
    a, b = median_ms(samples["ours"]), median_ms(samples["serial"])
    calls = max(counted, key=lambda c: sum(c.values()))
    total = sum(calls.values())
    where = f"+{rtt * 1000:.0f} ms round trip" if rtt else "loopback"
    return Row(
        GROUP_SUBMIT,
        f"Lepton: {SPLITS} jobs, ≤ {PARALLEL} at a time, {where}",
        ours=f"{total} calls, {ms(a)}",
        other=f"{SPLITS} serial POST /jobs, {ms(b)}",
        goal="1 create per job; faster than serial" if rtt else "1 create per job",
        met=total <= SPLITS + 1 and (a < b or not rtt),
        note=f"calls: {_calls(calls)}; {b / a:.2f}× the serial loop's speed; median of {rounds}",
        data={"calls": dict(calls), "ours_ms": a, "serial_ms": b, "rtt_ms": rtt * 1000},
    )


def _track(store: Store, native_id: str) -> None:
    job_id = new_id()
    store.add(
        JobRecord(
            id=job_id,
            name="bench-lepton",
            backend="lepton",
            state=State.PENDING,
            job_dir=str(store.jobs_dir(job_id)),
            native_id=native_id,
        )
    )


def _poll(spec: JobSpec, store: Store, http: httpx.Client, rounds: int) -> list[Row]:
    """The newest 1, 100 and 1,000 jobs of a workspace holding those 1,000 (all Queueing)."""
    have = store.count()
    if have < max(SIZES):
        body = api.dry_run(spec, "lepton", store=store).payload
        names = [f"bench-fill-{i:04d}" for i in range(max(SIZES) - have)]

        def create(name: str) -> str:
            sent = {**body, "metadata": {**body["metadata"], "id": name}}
            created = http.post("/jobs", json=sent)
            created.raise_for_status()
            return created.json()["metadata"]["id"]

        with ThreadPoolExecutor(PARALLEL) as pool:
            natives = list(pool.map(create, names))
        for native in natives:
            _track(store, native)
    records = sorted(store.list(limit=None), key=lambda r: r.created_at)  # workspace order
    rows = []
    for size in SIZES:
        tracked = records[-size:]
        counted: list[Counter[str]] = []

        def ours(tracked: list[JobRecord] = tracked, counted: list[Counter[str]] = counted) -> None:
            with counting_http() as calls:
                api.refresh(tracked, store)
            counted.append(calls)

        def per_job(tracked: list[JobRecord] = tracked) -> None:
            for record in tracked:
                http.get(f"/jobs/{record.native_id}").raise_for_status()

        contenders: dict[str, Callable[[], Any]] = {"ours": ours, "per_job": per_job}
        samples = interleaved(contenders, rounds, warmup=1)
        calls = max(counted, key=lambda c: sum(c.values()))
        total = sum(calls.values())
        a, b = median_ms(samples["ours"]), median_ms(samples["per_job"])
        rows.append(
            Row(
                GROUP_POLL,
                f"Lepton: {size:,} tracked jobs",
                ours=f"{total} calls ({_calls(calls)}), {ms(a)}",
                other=f"{size:,} GET /jobs/{{id}}, {ms(b)}",
                goal="≤ 2 calls",
                met=total <= 2,
                note=f"workspace of {len(records):,} jobs, the tracked ones newest; a poll lists"
                " 500 a page until it has seen every tracked job, so it grows by 1 call per"
                " 500 jobs listed before them",
                data={"calls": dict(calls), "ours_ms": a, "per_job_ms": b},
            )
        )
    return rows


def _calls(calls: Counter[str]) -> str:
    return " + ".join(f"{n} {route}" for route, n in sorted(calls.items()))
