"""How each backend reaches a running job's nodes, from the job's record: SkyPilot's ssh
aliases, Lepton's one line (its API has no way in), and the default for any other."""

from __future__ import annotations

import shlex

import pytest

from anylaunch.backends.base import Backend, NotReachable
from anylaunch.backends.lepton.backend import LeptonBackend
from anylaunch.backends.skypilot import live as sky_live
from anylaunch.backends.skypilot.backend import SkyPilotBackend
from anylaunch.node import runtime
from anylaunch.state import State
from anylaunch.store import JobRecord


def record(backend: str, native: str, **meta: object) -> JobRecord:
    return JobRecord(
        id="j1", name="t", backend=backend, state=State.RUNNING, job_dir="/tmp/j1",
        native_id=native, meta=dict(meta), plan={"nodes": 2},
    )  # fmt: skip


def test_skypilot_reaches_the_head_and_each_worker_by_their_ssh_aliases():
    job = record("skypilot", "train-abc/3", cluster_name="train-abc")
    head = SkyPilotBackend().enter(job, 0, ["nvidia-smi"], tty=False)
    worker = SkyPilotBackend().enter(job, 1, [], tty=True)
    assert head.argv[:3] == ["ssh", "-T", "train-abc"] and worker.argv[:3] == [
        "ssh",
        "-t",
        "train-abc-worker1",
    ]
    # The remote shell reads one line: it splits back into exactly the runtime's words.
    words = runtime.live_argv("enter", "j1", "0", "--", "nvidia-smi")
    assert shlex.split(head.argv[3]) == words
    relay = SkyPilotBackend().relay(job, 1, 6006)
    assert relay.argv == ["ssh", "-W", "127.0.0.1:6006", "train-abc-worker1"]


def test_a_skypilot_managed_job_cannot_be_reached_and_says_why():
    job = record("skypilot", "managed/7", mode="managed")
    with pytest.raises(NotReachable, match="managed job"):
        sky_live.alias(job, 0)


def test_lepton_says_in_one_line_that_its_api_has_no_way_in():
    job = record("lepton", "job-abc")
    for call in (
        lambda b: b.enter(job, 0, ["ls"], tty=False),
        lambda b: b.stacks(job, None, None, []),
        lambda b: b.relay(job, 0, 80),
    ):
        with pytest.raises(NotReachable) as caught:
            call(LeptonBackend())
        assert "no exec, shell or port-forward endpoint" in caught.value.message
        assert "\n" not in caught.value.message


def test_a_backend_without_a_way_in_says_so():
    class Toy(Backend):
        name = "toy"
        prepare = plan = describe = submit = poll = cancel = logs = None  # type: ignore[assignment]

    with pytest.raises(NotReachable, match="the toy backend cannot reach"):
        Toy().enter(record("toy", "1"), 0, [], tty=False)
