"""Runs of parallel splits on the local backend: SPLIT_ID/SPLIT_VALUE, and retry of only
the failed splits with the same split ids."""

from __future__ import annotations


def test_retry_reruns_only_the_failed_split_and_the_run_succeeds(cli, write, tmp_path):
    marker = tmp_path / "split2-failed-once"
    path = write(
        f"""
        launcher: none
        splits: [alpha, beta, gamma, delta]
        command:
          - bash
          - -c
          - 'echo "split=$SPLIT_ID value=$SPLIT_VALUE"; if [ "$SPLIT_ID" = 2 ] && [ ! -e {marker} ]; then touch {marker}; exit 4; fi'
        """
    )
    first = cli("run", str(path), "--json")
    assert first.rc == 1
    run = first.json()
    assert run["state"] == "FAILED" and [s["state"] for s in run["splits"]] == [
        "SUCCEEDED",
        "SUCCEEDED",
        "FAILED",
        "SUCCEEDED",
    ]
    failed_job = run["splits"][2]["attempts"][0]["id"]
    assert "split=2 value=gamma" in cli("logs", failed_job).out

    retried = cli("retry", run["id"], "--failed", "--json")
    assert retried.rc == 0, retried.err
    after = retried.json()
    assert after["state"] == "SUCCEEDED"
    assert [len(s["attempts"]) for s in after["splits"]] == [1, 1, 2, 1]
    second = after["splits"][2]["attempts"][1]
    assert second["split_id"] == 2 and second["run_id"] == run["id"]
    assert "split=2 value=gamma" in cli("logs", second["id"]).out
    # Only split 2 ran again: the others keep their single job.
    assert len(cli("ps", "--json").json()) == 5


def test_a_run_detaches_and_status_shows_its_splits(cli, write):
    path = write("launcher: none\nsplits: 3\ncommand: [bash, -c, 'echo $SPLIT_ID']\n")
    started = cli("run", str(path), "--detach", "--json")
    assert started.rc == 0
    run_id = started.json()["id"]
    assert started.json()["kind"] == "run"
    status = cli("status", run_id[:5], "--json").json()
    assert status["id"] == run_id and status["kind"] == "run"
    assert [s["split_id"] for s in status["splits"]] == [0, 1, 2]
    nothing = cli("retry", run_id, "--failed", "--json")
    assert nothing.rc == 0


def test_retry_needs_the_failed_flag_and_a_known_run(cli_inproc):
    assert cli_inproc("retry", "nosuchrun", "--failed").rc == 2
    assert cli_inproc("retry", "nosuchrun").rc == 2


# A node that kills its own supervisor: nobody is left to collect how it ended, so the
# job ends UNKNOWN for good (never SUCCEEDED, never FAILED on a guess).
LOSES_ITS_SUPERVISOR = 'if [ "$SPLIT_ID" = 1 ]; then kill -9 "$PPID"; sleep 2; fi'


def test_a_run_with_a_split_unknown_for_good_ends_unknown_instead_of_waiting_forever(cli, write):
    path = write(f"launcher: none\nsplits: 2\ncommand: [bash, -c, '{LOSES_ITS_SUPERVISOR}']\n")
    done = cli("run", str(path), "--json", timeout=120)
    assert done.rc == 1, done.err
    run = done.json()
    assert [s["state"] for s in run["splits"]] == ["SUCCEEDED", "UNKNOWN"]
    assert run["state"] == "UNKNOWN"
    assert "died without a result" in run["splits"][1]["attempts"][0]["detail"]
