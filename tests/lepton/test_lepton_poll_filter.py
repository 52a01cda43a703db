"""A poll lists only the jobs anylaunch tracks, by their job-id label, as the official
SDK's `list_all(query=...)` / `list_matching` ask the service: its calls do not grow with
the rest of the workspace."""

from __future__ import annotations

from anylaunch import api
from anylaunch.backends.lepton.backend import SELECTOR_IDS, LeptonBackend
from anylaunch.backends.lepton.plan import LABEL_JOB_ID
from anylaunch.jobfile import loader
from anylaunch.state import State
from anylaunch.store import JobRecord, Store, new_id
from lepton_emulator.faults import Fault

JOB = "name: held\ncommand: python train.py\nimage: pytorch/pytorch:2.5.1\ngpus_per_node: 8\nlepton: {}\n"


def _fill(emulator, home, others: int, tracked: int) -> tuple[Store, list[JobRecord]]:
    """A workspace of `others` jobs nobody tracks and `tracked` jobs in the store, all
    held Queueing (no replica starts)."""
    world = emulator.world
    world.add_faults([Fault(kind="stuck_queue", job="held-*")])
    store = Store(home)
    spec = loader.from_text(JOB, file=str(home / "job.yaml"))
    body = api.dry_run(spec, "lepton", store=store).payload
    for i in range(others):
        labels = {LABEL_JOB_ID: new_id()}
        world.create({**body, "metadata": {"id": f"held-other-{i}", "labels": labels}}, "me")
    records = []
    for i in range(tracked):
        job_id = new_id()
        labels = {LABEL_JOB_ID: job_id}
        run = world.create({**body, "metadata": {"id": f"held-mine-{i}", "labels": labels}}, "me")
        record = JobRecord(
            id=job_id,
            name="held",
            backend="lepton",
            state=State.PENDING,
            job_dir=str(store.jobs_dir(job_id)),
            native_id=run.id,
        )
        store.add(record)
        records.append(record)
    world.calls.clear()
    return store, records


def test_one_tracked_job_is_one_list_call_in_a_workspace_of_many_pages(emulator, home):
    store, records = _fill(emulator, home, others=1_100, tracked=1)  # 3 pages of 500
    seen = LeptonBackend().poll(records)
    assert seen[records[0].id].state is State.PENDING
    assert dict(emulator.world.calls) == {"GET /jobs": 1}
    store.close()


def test_tracked_jobs_are_listed_a_selector_of_ids_at_a_time(emulator, home):
    store, records = _fill(emulator, home, others=50, tracked=SELECTOR_IDS + 5)
    seen = LeptonBackend().poll(records)
    assert {o.state for o in seen.values()} == {State.PENDING} and len(seen) == len(records)
    assert dict(emulator.world.calls) == {"GET /jobs": 2}  # no job fetched one by one
    store.close()


def test_a_job_the_label_list_misses_is_fetched_by_id(emulator, home):
    store, records = _fill(emulator, home, others=3, tracked=1)
    job = emulator.world.jobs[records[0].native_id or ""]
    job.metadata["labels"] = {}  # as a job created without the label would be
    seen = LeptonBackend().poll(records)
    assert seen[records[0].id].state is State.PENDING
    assert dict(emulator.world.calls) == {"GET /jobs": 1, "GET /jobs/{job_id}": 1}
    store.close()
