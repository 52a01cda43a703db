"""A controller that died inside a step's start, at each point the store can see: the
next `status` starts a new controller, which finishes the start without a second job."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import wait_until

from anylaunch import workflow
from anylaunch.state import State
from anylaunch.store import JobRecord, Store, this_process
from anylaunch.workflow import record as wfrecord

FAST = {"ANYLAUNCH_WORKFLOW_POLL_S": "0.3"}


def dead_process() -> dict[str, float]:
    """What `this_process()` recorded for a process that has since exited."""
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json; from anylaunch.store import this_process;"
            " print(json.dumps(this_process()))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(proc.stdout)


def recorded(write, home, text: str) -> tuple[str, Store]:
    """A workflow recorded as its controller does, held by a controller now dead."""
    wf = workflow.load(str(write(text, "wf.yaml")))
    store = Store(home)
    wf_id = wfrecord.add(wf, wf.order(), wfrecord.CONTROLLED, store, keyed=True)
    assert store.claim_controller(wf_id, dead_process())
    return wf_id, store


TWO_STEPS = """
launcher: none
steps:
  one:
    command: [bash, -c, "echo one"]
  two:
    needs: [one]
    splits: 2
    command: [bash, -c, "echo two $SPLIT_ID"]
"""


def test_died_after_claiming_a_step_before_recording_its_jobs(cli, write, home):
    wf_id, store = recorded(write, home, TWO_STEPS)
    store.claim_step(wf_id, "one", wfrecord.run_id(wf_id, "one"))  # then the crash
    assert cli("status", wf_id, "--json", env=FAST).json()["steps"][0]["state"] == "PENDING"
    wait_until(
        lambda: cli("status", wf_id, "--json", env=FAST).json()["state"] == "SUCCEEDED",
        timeout=120,
        what="the workflow to finish",
    )
    final = cli("status", wf_id, "--json").json()
    assert [[len(s["attempts"]) for s in step["splits"]] for step in final["steps"]] == [
        [1],
        [1, 1],
    ]


def test_died_after_recording_split_jobs_before_submitting_them(cli, write, home):
    wf_id, store = recorded(write, home, TWO_STEPS)
    # Step one done; step two's two jobs recorded by the dead controller, never sent.
    first = workflow.execute_step(wf_id, "one", store=store)
    assert store.get(first).state is not None
    wait_until(
        lambda: cli("status", first, "--json").json()["state"] == "SUCCEEDED",
        what="step one",
    )
    run = wfrecord.run_id(wf_id, "two")
    store.claim_step(wf_id, "two", run)
    gone = dead_process()
    orphans = [
        JobRecord(
            id=f"orphan{i}x",
            name=f"wf-two-{i}",
            backend="local",
            state=State.PENDING,
            job_dir=str(store.jobs_dir(f"orphan{i}x")),
            run_id=run,
            split_id=i,
            spec=wfrecord.spec_of(store.get_workflow(wf_id), "two").redacted(),
            meta={"submitter": gone},
        )
        for i in range(2)
    ]
    store.add_many(orphans)
    assert this_process()["pid"] != gone["pid"]
    wait_until(
        lambda: cli("status", wf_id, "--json", env=FAST).json()["state"] == "SUCCEEDED",
        timeout=120,
        what="the workflow to finish",
    )
    final = cli("status", wf_id, "--json").json()
    two = final["steps"][1]["splits"]
    # The recorded jobs were submitted under their own ids: no second job per split.
    assert [[a["id"] for a in s["attempts"]] for s in two] == [["orphan0x"], ["orphan1x"]]
    assert "two 1" in cli("logs", "orphan1x").out
