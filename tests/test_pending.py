"""Why a job is pending: Slurm's reasons in plain words, and the stuck-in-queue advice."""

from __future__ import annotations

from anylaunch.observe import pending


def test_slurm_reasons_become_plain_words():
    assert (
        pending.explain("pending: Resources", 10)
        == "pending (Resources): waiting for nodes to become free"
    )
    assert "lower slurm.time" in pending.explain("pending: PartitionTimeLimit", 10)
    assert pending.explain("pending: SomethingNew", 10) == "pending: SomethingNew"
    assert pending.explain(None, 10) is None


def test_a_job_queued_past_the_threshold_gets_the_capacity_advice(monkeypatch):
    monkeypatch.setenv("ANYLAUNCH_PENDING_WARN_MIN", "15")
    text = pending.explain("pending: Priority", 16 * 60)
    assert text.startswith(
        "pending (Priority): waiting behind jobs of higher priority; queued 16 min without a node"
    )
    assert "resource shape" in text and "node group" in text
    assert pending.explain(None, 20 * 60).startswith("queued 20 min without a node")
