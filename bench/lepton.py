"""Lepton (emulated workspace): submitting 100 jobs, and the API calls of one status poll.

What users do instead: the leptonai SDK (and NeMo-Run, TAO SDK on top of it) creates
jobs one `create_job` after another and reads status with one `get_job` per job. Both
are timed here against the same emulator, interleaved with anylaunch, which submits the
splits of a run with bounded concurrency and polls every tracked job from one paginated
list.
"""

from __future__ import annotations

import dataclasses
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

from anylaunch import api
from anylaunch.backends.lepton.backend import SELECTOR_IDS
from anylaunch.backends.lepton.plan import LABEL_JOB_ID
from anylaunch.jobfile import loader
from anylaunch.jobfile.spec import JobSpec
from anylaunch.launch import splits
from anylaunch.launch.resolve import resolve
from anylaunch.observe import watch
from anylaunch.state import State
from anylaunch.store import JobRecord, Store, new_id
from bench.common import Row, bench_record, failed, interleaved, median_ms, ms
from bench.emulator import PrivateEmulator, counting_http

GROUP_SUBMIT = "submit"
GROUP_POLL = "status poll"
# The usual TAO-on-Lepton job: a GPU count, no explicit shape (resolved from the workspace).
JOB = "name: bench-lepton\ncommand: python train.py\nimage: pytorch/pytorch:2.5.1\ngpus_per_node: 8\nlepton: {}\n"
PARALLEL = 8
RTTS = (0.0, 0.05)  # loopback, and a simulated 50 ms to a real gateway
SPLITS = 100
SIZES = (1, 100, 1000)
WORKSPACES = (1_000, 10_000, 100_000)


LEPTON_ENV = ("LEPTON_WORKSPACE_URL", "LEPTON_WORKSPACE_ID", "LEPTON_AUTH_TOKEN", "NGC_KEY")


@contextmanager
def _restored_environ(*names: str) -> Iterator[None]:
    """On the way out, these environment variables are as they were (set or unset): a
    bench points the Lepton client at its own emulator meanwhile."""
    saved = {name: os.environ.get(name) for name in names}
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run(rounds: int = 3) -> list[Row]:
    """Submission in one fresh workspace, polling in another that holds just the 1,000
    jobs polled: a poll lists the workspace until it has seen every tracked job, so its
    cost depends on how many jobs are listed before them (see the rows' note)."""
    rows: list[Row] = []
    with _restored_environ(*LEPTON_ENV):
        os.environ.pop("NGC_KEY", None)
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
                rows.append(failed(GROUP_POLL, "Lepton", "≤ 1 call per 200 tracked", exc))
        rows += workspace_sizes(rounds=rounds)
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
            yield loader.from_text(JOB, file=str(home / "job.yaml")), store, http
        finally:
            http.close()
            store.close()
            shutil.rmtree(home, ignore_errors=True)


def _launch(spec: JobSpec, store: Store) -> list[str]:
    """The splits through anylaunch's own bounded-concurrency path (or a pool like it)."""
    if "max_parallel" in inspect.signature(splits.launch).parameters:
        run_ = splits.launch(resolve(spec, "lepton"), SPLITS, store=store, max_parallel=PARALLEL)
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


def _track(store: Store, native_id: str, job_id: str | None = None) -> None:
    store.add(
        bench_record(store, "lepton", "bench-lepton", State.PENDING, native_id, job_id=job_id)
    )


def _poll(spec: JobSpec, store: Store, http: httpx.Client, rounds: int) -> list[Row]:
    """The newest 1, 100 and 1,000 jobs of a workspace holding those 1,000 (all Queueing)."""
    have = store.count()
    if have < max(SIZES):
        body = api.dry_run(spec, "lepton", store=store).payload
        ids = [new_id() for _ in range(max(SIZES) - have)]

        def create(job_id: str) -> str:
            # Labelled with its own anylaunch job id, as anylaunch labels what it submits.
            metadata = {**body["metadata"], "id": f"bench-fill-{job_id}",
                        "labels": {LABEL_JOB_ID: job_id}}  # fmt: skip
            created = http.post("/jobs", json={**body, "metadata": metadata})
            created.raise_for_status()
            return created.json()["metadata"]["id"]

        with ThreadPoolExecutor(PARALLEL) as pool:
            natives = list(pool.map(create, ids))
        for native, job_id in zip(natives, ids, strict=True):
            _track(store, native, job_id)
    records = sorted(store.list(limit=None), key=lambda r: r.created_at)  # workspace order
    rows = []
    for size in SIZES:
        tracked = records[-size:]
        counted: list[Counter[str]] = []

        def ours(tracked: list[JobRecord] = tracked, counted: list[Counter[str]] = counted) -> None:
            with counting_http() as calls:
                watch.refresh(tracked, store)
            counted.append(calls)

        def per_job(tracked: list[JobRecord] = tracked) -> None:
            for record in tracked:
                http.get(f"/jobs/{record.native_id}").raise_for_status()

        contenders: dict[str, Callable[[], Any]] = {"ours": ours, "per_job": per_job}
        samples = interleaved(contenders, rounds, warmup=1)
        calls = max(counted, key=lambda c: sum(c.values()))
        total = sum(calls.values())
        a, b = median_ms(samples["ours"]), median_ms(samples["per_job"])
        bound = -(-size // SELECTOR_IDS)
        rows.append(
            Row(
                GROUP_POLL,
                f"Lepton: {size:,} tracked jobs",
                ours=f"{total} calls ({_calls(calls)}), {ms(a)}",
                other=f"{size:,} GET /jobs/{{id}}, {ms(b)}",
                goal=f"≤ {bound} calls (1 per {SELECTOR_IDS} tracked)",
                met=total <= bound,
                note=f"workspace of {len(records):,} jobs; one list call per {SELECTOR_IDS}"
                f" tracked jobs, by their job-id label; {b / a:.1f}× faster than one GET per job",
                data={"calls": dict(calls), "ours_ms": a, "per_job_ms": b},
            )
        )
    return rows


def workspace_sizes(sizes: tuple[int, ...] = WORKSPACES, rounds: int = 3) -> list[Row]:
    """One tracked job in an emulated workspace of 1,000 / 10,000 / 100,000 jobs.

    Simulated in this process: the emulator's world is filled directly (no 100,000 POSTs)
    with finished jobs labelled with other job ids, and the tracked job is the newest.
    The alternative is the poll before the label filter: paging through the workspace,
    500 a page, until the tracked job is seen.
    """
    from anylaunch.backends.lepton.backend import LeptonBackend
    from anylaunch.backends.lepton.rest.client import LeptonClient
    from lepton_emulator.server import Emulator

    rows: list[Row] = []
    # The emulator makes a directory per job: on tmpfs 100,000 of them cost seconds to
    # make and remove, on this machine's disk many minutes.
    shm = Path("/dev/shm")
    home = Path(tempfile.mkdtemp(prefix="bench-lepton-ws-", dir=shm if shm.is_dir() else None))
    try:
        with _restored_environ(*LEPTON_ENV), Emulator(state_dir=home / "emulator") as emu:
            os.environ.update(emu.env())
            os.environ.pop("NGC_KEY", None)
            store = Store(home / "store")
            spec = loader.from_text(JOB, file=str(home / "job.yaml"))
            body = api.dry_run(spec, "lepton", store=store).payload
            world = emu.world
            # Every job here is finished: the loop that advances live jobs has nothing to
            # do, and over 100,000 jobs it would hold the world's lock most of the time.
            world._stop.set()
            mine: JobRecord | None = None
            with world.lock:  # one job made the emulator's way; the others are its copies
                fill = {**body["metadata"], "id": "bench-fill"}
                model = world.create({**body, "metadata": fill}, "bench")
                model.move("Completed")
            for size in sizes:
                with world.lock:
                    if mine is not None:
                        del world.jobs[mine.native_id or ""]
                    while len(world.jobs) < size - 1:
                        _copy(world, model)
                    job_id = new_id()
                    meta = {
                        **body["metadata"],
                        "id": "bench-mine",
                        "labels": {LABEL_JOB_ID: job_id},
                    }
                    run = world.create({**body, "metadata": meta}, "bench")
                    run.move("Completed")
                mine = bench_record(
                    store, "lepton", "bench-mine", State.RUNNING, run.id, job_id=job_id
                )
                counts: dict[str, int] = {}

                def ours(record: JobRecord = mine, counts: dict[str, int] = counts) -> None:
                    world.calls.clear()
                    LeptonBackend().poll([record])
                    counts["ours"] = sum(world.calls.values())

                def paging(native: str = run.id, counts: dict[str, int] = counts) -> None:
                    world.calls.clear()
                    with LeptonClient() as client:
                        for job in client.list_jobs():
                            if job.metadata.id == native:
                                break
                    counts["paging"] = sum(world.calls.values())

                # Paging through 100,000 jobs takes a minute: one timed round there.
                times = 1 if size >= 100_000 else rounds
                samples = interleaved({"ours": ours, "paging": paging}, times, warmup=0)
                a, b = median_ms(samples["ours"]), median_ms(samples["paging"])
                rows.append(
                    Row(
                        GROUP_POLL,
                        f"Lepton: 1 tracked job, workspace of {size:,}",
                        ours=f"{counts['ours']} calls, {ms(a)}",
                        other=f"paging: {counts['paging']} calls, {ms(b)}",
                        goal="1 call, whatever the workspace holds",
                        met=counts["ours"] == 1,
                        note=f"{b / a:.1f}× faster than paging to it; emulator in-process (the"
                        f" service's own filtering time included), median of {times}",
                        data={
                            "size": size,
                            "calls": counts["ours"],
                            "ours_ms": a,
                            "paging_calls": counts["paging"],
                            "paging_ms": b,
                        },
                    )
                )
            store.close()
    except Exception as exc:
        rows.append(failed(GROUP_POLL, "Lepton: 1 tracked job, workspace sizes", "1 call", exc))
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return rows


def _copy(world: Any, model: Any) -> None:
    """A finished job like `model` under its own id and job-id label, put straight into
    the emulator's world: validating and queueing 100,000 jobs one by one (a directory
    each) would take most of the bench's time, and every field a listing shows is the
    model's own."""
    native = f"bench-fill-{len(world.jobs):06d}"
    labels = {LABEL_JOB_ID: new_id()}
    metadata = {**model.metadata, "id": native, "labels": labels}
    world.jobs[native] = dataclasses.replace(model, id=native, metadata=metadata, events={})


def _calls(calls: Counter[str]) -> str:
    return " + ".join(f"{n} {route}" for route, n in sorted(calls.items()))
