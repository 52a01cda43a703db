"""API faults: 50 submissions to the Lepton emulator while 30% of the calls fail — 5xx,
429 with Retry-After, answers lost after the job was created (an error status, or the
connection dropped mid-answer), truncated bodies, slow answers — make exactly 50 jobs,
and `status`, `ps` and `logs` keep working under the same faults.

The submissions are one 50-split run from the real CLI (8 submits at a time), so the
create-once rule is tested with concurrent creates, as a user's run would make them.
"""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from reliability_helpers import FIGURES, PY, cli_env, count_tracebacks, fault, load_json

from lepton_emulator.server import Server, Workspace

SUBMISSIONS = 50
# Each route fails 30% of the time in all (the first fault that fires wins).
CREATE_FAULTS = [
    {"kind": "http", "status": 503, "rate": 0.07},
    {"kind": "http", "status": 429, "retry_after": 0.5, "rate": 0.06},
    {"kind": "http_after", "status": 502, "rate": 0.07},  # created, answer lost
    {"kind": "drop", "rate": 0.08},  # created, connection dropped mid-answer
    {"kind": "slow", "delay_s": 0.4, "rate": 0.08},
]
READ_FAULTS = [
    {"kind": "http", "status": 500, "rate": 0.1},
    {"kind": "http", "status": 429, "retry_after": 0.2, "rate": 0.05},
    {"kind": "drop", "rate": 0.06},
    {"kind": "truncate", "rate": 0.06},
    {"kind": "slow", "delay_s": 0.3, "rate": 0.05},
]


@pytest.fixture
def emulator(tmp_path: Path, lepton_server: Server):
    with lepton_server.open(state_dir=tmp_path / "emulator", seed=11) as emu:
        yield emu


def _all_faults() -> list[dict]:
    faults = [{**f, "route": "POST /jobs"} for f in CREATE_FAULTS]
    faults += [{**f, "route": "POST /usersecrets"} for f in CREATE_FAULTS[:3]]
    faults += [{**f, "route": "GET /*"} for f in READ_FAULTS]
    return faults


def _raw_jobs(emulator: Workspace) -> list[dict]:
    resp = httpx.get(
        emulator.url + "/jobs",
        params={"job_query_mode": "alive_and_archive"},
        headers={"Authorization": f"Bearer {emulator.token}"},
        timeout=30,
    )
    resp.raise_for_status()
    return resp.json()["jobs"]


def test_fifty_submissions_under_thirty_percent_faults_make_exactly_fifty_jobs(
    emulator: Workspace, home: Path, tmp_path: Path
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(
        "name: faulty\n"
        "image: python:3.11\n"
        "launcher: none\n"
        f"splits: {SUBMISSIONS}\n"
        "command: [bash, -c, 'echo hello-from-split-$SPLIT_ID']\n"
        "env: {WANDB_API_KEY: planted-wandb-key-1234}\n"
        "lepton: {resource_shape: cpu.small}\n"
    )
    from lepton_emulator.server import set_faults

    set_faults(emulator.url, emulator.token, _all_faults())
    env = cli_env(home, **emulator.env())

    def cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [PY, "-m", "anylaunch", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=tmp_path,
        )
        count_tracebacks(done.stdout, done.stderr)
        return done

    started = cli("run", str(job), "--detach", "--json", "--no-preflight")
    assert started.returncode == 0, started.stderr
    run = load_json(started.stdout)
    assert len(run["splits"]) == SUBMISSIONS

    # Status, ps and logs under the same faults, until every split has succeeded.
    deadline = time.monotonic() + 150
    while True:
        status = cli("status", run["id"], "--json")
        assert status.returncode == 0, status.stderr
        view = load_json(status.stdout)
        if view["state"] == "SUCCEEDED" or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert view["state"] == "SUCCEEDED", Counter(s["state"] for s in view["splits"])
    listed = cli("ps", "--all", "--json")
    assert listed.returncode == 0, listed.stderr
    assert len(load_json(listed.stdout)) == SUBMISSIONS
    for split in view["splits"][:5]:
        logs = cli("logs", split["attempts"][0]["id"])
        assert logs.returncode == 0, logs.stderr
        assert f"hello-from-split-{split['split_id']}" in logs.stdout

    faults = emulator.world.faults
    by_kind: Counter[str] = Counter()
    for index, times in faults._fired.items():
        by_kind[f"lepton {faults.list()[index].kind}"] += times
    fired = sum(by_kind.values())
    emulator.clear_faults()
    created = Counter(j["metadata"]["name"] for j in _raw_jobs(emulator))
    natives = [s["attempts"][0]["native_id"] for s in view["splits"]]
    duplicates = sum(n - 1 for n in created.values())
    lost = SUBMISSIONS - len(created) + sum(len(s["attempts"]) != 1 for s in view["splits"])
    for kind, times in by_kind.items():
        fault(kind, times)
    FIGURES["jobs submitted"] += sum(created.values())
    FIGURES["duplicates"] += duplicates
    FIGURES["lost"] += lost
    assert (duplicates, lost) == (0, 0), created
    assert sorted(j["metadata"]["id"] for j in _raw_jobs(emulator)) == sorted(natives)
    # How many calls there are depends on how long the run takes (status is polled until
    # it ends), so the count is not fixed; what the test needs is that answers were lost
    # after jobs were created, the faults that could make a second job.
    lost_answers = by_kind["lepton http_after"] + by_kind["lepton drop"]
    assert fired >= 20 and lost_answers >= 3, f"only {fired} faults fired: {dict(by_kind)}"
