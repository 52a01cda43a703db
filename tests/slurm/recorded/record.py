"""Record what squeue and sacct print for jobs in each state, on a real cluster.

    SLURM_CONF=... python tests/slurm/recorded/record.py [case ...]

Runs exactly the command lines a poll runs (`parse.squeue_argv`, `parse.sacct_argv`,
`parse.comment_argv`) and writes one JSON file per case next to this script; the tests
in tests/slurm/test_parse.py read them back through the pure parsers. Every job it
submits is small (one core, seconds) and is cancelled or ends on its own. It never
touches nodes, so a node failure is not among the cases — except `gres_drained`, which
drains one node for a moment (the GPU preflight's input, read by
tests/slurm/test_gpu_request.py): record it on a cluster of your own only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from anylaunch.backends.slurm import gres, parse

HERE = Path(__file__).parent
WORK = Path(tempfile.mkdtemp(prefix="slurm-record-"))


def sh(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)


def sbatch(script: str, *flags: str) -> str:
    path = WORK / f"job{time.monotonic_ns()}.sh"
    path.write_text("#!/bin/bash\n" + script + "\n")
    proc = sh(["sbatch", "--parsable", f"--chdir={WORK}", "--output=/dev/null",
               "--cpus-per-task=1", *flags, str(path)])  # fmt: skip
    if proc.returncode:
        raise SystemExit(f"sbatch failed: {proc.stderr}")
    return parse.job_id(proc.stdout)


def call(argv: list[str]) -> dict[str, object]:
    proc = sh(argv)
    return {"argv": argv, "returncode": proc.returncode, "stdout": proc.stdout,
            "stderr": proc.stderr}  # fmt: skip


def squeue_state(job: str) -> set[str]:
    out = sh(["squeue", "--noheader", "--array", "--states=all", "--jobs", job, "-o", "%T"])
    return set(out.stdout.split())


def sacct_state(job: str) -> set[str]:
    out = sh(["sacct", "--noheader", "--parsable2", "--allocations", "--jobs", job,
              "--format", "State"])  # fmt: skip
    return {line.split(" ", 1)[0] for line in out.stdout.split()}


def until(what: Callable[[], bool], why: str, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {why}")
        time.sleep(0.5)


def save(case: str, about: str, ids: list[str], *, squeue: bool = True, sacct: bool = True,
         expect: dict[str, object] | None = None) -> None:  # fmt: skip
    version = sh(["sinfo", "--version"]).stdout.strip()
    record: dict[str, object] = {"case": case, "about": about, "slurm": version, "ids": ids}
    if squeue:
        record["squeue"] = call(parse.squeue_argv(ids))
    if sacct:
        record["sacct"] = call(parse.sacct_argv(ids))
    (HERE / f"{case}.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"{case}: {ids}", file=sys.stderr)


def finished(job: str) -> Callable[[], bool]:
    """Ended for squeue and written to accounting (slurmdbd lags a little)."""
    done = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL"}
    return lambda: bool(squeue_state(job) & done) and bool(sacct_state(job) & done)


def pending() -> None:
    held = sbatch("true", "--hold")
    later = sbatch("true", "--begin=now+3600")
    until(lambda: "PENDING" in squeue_state(held) and "PENDING" in squeue_state(later), "pending")
    save("pending", "a held job (JobHeldUser) and one that begins in an hour (BeginTime)",
         [held, later])  # fmt: skip
    sh(["scancel", held, later])
    until(lambda: finished(held)() and finished(later)(), "cancelled while pending")
    save("cancelled_pending", "the two pending jobs above, cancelled before they ran",
         [held, later])  # fmt: skip


def running() -> None:
    job = sbatch("sleep 300")
    until(lambda: "RUNNING" in squeue_state(job), "running")
    save("running", "a job running `sleep 300`", [job])
    sh(["scancel", job])
    until(finished(job), "cancelled while running")
    save("cancelled_running", "the running job above, after scancel", [job])


def ended() -> None:
    ok = sbatch("true")
    bad = sbatch("exit 3")
    killed = sbatch("kill -9 $$")
    for job in (ok, bad, killed):
        until(finished(job), f"job {job} to end")
    save("ended", "exit 0, exit 3, and a script killed by SIGKILL", [ok, bad, killed])
    ok_, bad_, killed_ = ok, bad, killed
    save("ended_sacct_only", "the same jobs as accounting alone tells them", [ok_, bad_, killed_],
         squeue=False)  # fmt: skip


def timeout() -> None:
    job = sbatch("sleep 600", "--time=1")
    until(finished(job), "the time limit", timeout=240)
    save("timeout", "`sleep 600` under --time=1", [job])


def array() -> None:
    job = sbatch("sleep 20; [ $SLURM_ARRAY_TASK_ID != 3 ]", "--array=1-5%2")
    until(lambda: "RUNNING" in squeue_state(job), "array tasks to run")
    tasks = [f"{job}_{i}" for i in range(1, 6)]
    save("array_throttled", "--array=1-5%2: two tasks run, three wait (JobArrayTaskLimit)",
         tasks)  # fmt: skip
    save("array_by_base_id", "the same array asked for by its base id", [job])
    until(lambda: all(finished(t)() for t in tasks), "the array to end", timeout=300)
    save("array_ended", "the array above, ended: task 3 exited 1", tasks)


def requeued() -> None:
    job = sbatch("sleep 300", "--requeue")
    until(lambda: "RUNNING" in squeue_state(job), "running")
    sh(["scontrol", "requeue", job])
    until(lambda: bool(squeue_state(job) & {"PENDING", "REQUEUED"}), "requeue")
    save("requeued", "a running --requeue job after `scontrol requeue`", [job])
    sh(["scancel", job])
    until(finished(job), "cancel after requeue")
    save("requeued_cancelled", "the requeued job, cancelled", [job])


def hetjob() -> None:
    path = WORK / "het.sh"
    path.write_text("#!/bin/bash\n#SBATCH --cpus-per-task=1\n#SBATCH hetjob\n"
                    "#SBATCH --cpus-per-task=1\nsleep 15\n")  # fmt: skip
    proc = sh(["sbatch", "--parsable", f"--chdir={WORK}", "--output=/dev/null", str(path)])
    job = parse.job_id(proc.stdout)
    until(lambda: "RUNNING" in squeue_state(job), "het job to run")
    save("hetjob_running", "a heterogeneous job of two components, running", [job])
    until(finished(job), "het job to end")
    save("hetjob_ended", "the heterogeneous job, ended", [job])


def unknown() -> None:
    save("unknown_id", "a job id slurmctld and accounting never had", ["99999999"])


def comments() -> None:
    single = sbatch("sleep 60", "--comment=anylaunch:rec00001")
    arr = sbatch("sleep 60", "--array=0-2", "--comment=anylaunch:rec00002")
    other = sbatch("sleep 60", "--comment=someone else")
    until(lambda: bool(squeue_state(single)) and bool(squeue_state(arr)), "queued")
    record = {"case": "comments", "about": "jobs found by their --comment (reconcile)",
              "slurm": sh(["sinfo", "--version"]).stdout.strip(), "ids": [single, arr, other],
              "squeue": call(parse.comment_argv())}  # fmt: skip
    (HERE / "comments.json").write_text(json.dumps(record, indent=1) + "\n")
    sh(["scancel", single, arr, other])


SINFO = ["sinfo", "--noheader", "-o", gres.SINFO_FORMAT]  # what the GPU preflight runs


def save_sinfo(case: str, about: str) -> None:
    record = {"case": case, "about": about, "slurm": sh(["sinfo", "--version"]).stdout.strip(),
              "sinfo": call(SINFO)}  # fmt: skip
    (HERE / f"{case}.json").write_text(json.dumps(record, indent=1) + "\n")
    print(case, file=sys.stderr)


def gres_idle() -> None:
    save_sinfo("gres_idle", "every node idle, with its GPUs (GRES gpu)")


def gres_busy() -> None:
    job = sbatch("sleep 300", "--nodes=1", "--gpus-per-node=2")
    until(lambda: "RUNNING" in squeue_state(job), "running")
    save_sinfo("gres_busy", "one node runs a job holding two of its GPUs (mixed)")
    sh(["scancel", job])
    until(finished(job), "cancelled")


def gres_drained() -> None:
    node = sh(["sinfo", "--noheader", "-N", "-o", "%N"]).stdout.split()[-1]
    sh(["scontrol", "update", f"nodename={node}", "state=drain", "reason=recording"])
    try:
        until(lambda: "drain" in sh(["sinfo", "--noheader", "-n", node, "-o", "%t"]).stdout,
              "drained")  # fmt: skip
        save_sinfo("gres_drained", f"node {node} drained, the others idle")
    finally:
        sh(["scontrol", "update", f"nodename={node}", "state=resume"])


CASES = {f.__name__: f for f in (pending, running, ended, timeout, array, requeued, hetjob,
                                  unknown, comments, gres_idle, gres_busy)}  # fmt: skip
# Run only when named: it drains a node of the cluster it talks to.
CASES_ON_YOUR_OWN_CLUSTER = {"gres_drained": gres_drained}

if __name__ == "__main__":
    if not os.environ.get("SLURM_CONF"):
        raise SystemExit("set SLURM_CONF (source .devstack/slurm.env)")
    for name in sys.argv[1:] or CASES:
        {**CASES, **CASES_ON_YOUR_OWN_CLUSTER}[name]()
