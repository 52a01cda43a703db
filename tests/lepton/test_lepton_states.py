"""A stopped (cancelled) Lepton job reads as cancelled everywhere, never as an error, and
`retry --failed` leaves it alone."""

from __future__ import annotations

import pytest

from anylaunch.backends.lepton.rest import wire
from anylaunch.backends.lepton.states import sdk_status, to_state
from anylaunch.observe.runs import RunView
from anylaunch.state import State


def job(state: str, completions: int = 1, **counters: int) -> wire.LeptonJob:
    return wire.LeptonJob.model_validate(
        {
            "metadata": {"id": "j-1"},
            "spec": {"completions": completions, "parallelism": completions},
            "status": {"state": state, **counters},
        }
    )


@pytest.mark.parametrize("state", ["Stopped", "Deleted"])
def test_a_stopped_job_is_cancelled_and_never_error(state):
    assert to_state(job(state, failed=0)) is State.CANCELLED
    assert sdk_status(state) == "Cancelled"


def test_an_archived_job_keeps_how_it_ended_and_is_unknown_where_its_counters_cannot_say():
    assert to_state(job("Archived", succeeded=1)) is State.SUCCEEDED
    assert to_state(job("Archived", 2, succeeded=2)) is State.SUCCEEDED
    assert to_state(job("Archived", 2, succeeded=1, failed=1)) is State.FAILED
    # One of two workers succeeded, or none counted (it failed before a worker ended):
    # Lepton archives completed and failed jobs alike, so neither is a success.
    assert to_state(job("Archived", 2, succeeded=1)) is State.UNKNOWN
    assert to_state(job("Archived")) is State.UNKNOWN
    assert sdk_status("Failed") == "Error"
    for completions, counters, reported in (
        (2, {"succeeded": 2}, "Complete"),
        (1, {"failed": 1}, "Error"),
        (2, {"succeeded": 1}, "Unknown"),
        (1, {}, "Unknown"),
    ):
        assert sdk_status("Archived", job("Archived", completions, **counters)) == reported


def test_retry_failed_picks_failed_splits_and_never_a_cancelled_one():
    class Attempt:
        def __init__(self, state: State) -> None:
            self.state = state

    view = RunView(
        "run1",
        "lepton",
        {
            0: [Attempt(State.FAILED)],
            1: [Attempt(State.CANCELLED)],
            2: [Attempt(State.FAILED), Attempt(State.CANCELLED)],
            3: [Attempt(State.PREEMPTED)],
        },  # type: ignore[dict-item]
    )
    assert view.failed() == [0, 3]
