"""Record real logs for the diagnosis corpus, the way the corpus' teardown and hang cases
were made: real jobs of the local backend (torchrun on CPU, gloo, 2 nodes x 2 ranks),
their logs as `anylaunch logs JOB` prints them.

    python tests/diagnose/record_logs.py teardown OUT [--runs N] [--env KEY=VALUE ...]
        [--torchrun NPROC]
        runs tests/programs/teardown_race.py N times and keeps the log of every run
        that did not succeed (OUT/teardown-K.log, with its state and exit code in
        OUT/teardown-K.json); with --torchrun, under one torchrun of NPROC ranks
        instead of the local backend (faster: the race needs many runs)
    python tests/diagnose/record_logs.py hang OUT
        starts tests/programs/hang.py, waits until every rank printed its step, dumps
        every rank's Python stack with py-spy (which must be on PATH or beside this
        interpreter) and writes OUT/hang.log: the job's log followed by the block the
        hang watchdog writes (its line, then per rank a header line and py-spy's dump)

Not a test: it takes minutes and its result depends on timing (the teardown race shows
in some runs only). Run it under an ANYLAUNCH_HOME of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ROOT / "tests" / "programs"
HANG_LINE = (
    "anylaunch: hang: no rank wrote output for {seconds}s; the Python stack of every rank follows"
)
RANK_LINE = "anylaunch: hang: rank {rank} (node {node}, pid {pid})"


def _anylaunch(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "anylaunch", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        check=False,
    )


def _job_file(folder: Path, program: str, env: dict[str, str]) -> Path:
    lines = [
        f"name: {Path(program).stem.replace('_', '-')}",
        f"command: python {program}",
        "nodes: 2",
        "gpus_per_node: 2",
        "env:",
        "  OMP_NUM_THREADS: '1'",
        *(f"  {key}: '{value}'" for key, value in env.items()),
        "local:",
        f"  workdir: {PROGRAMS}",
        "  kill_grace_s: 1",
    ]
    path = folder / "job.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def teardown_torchrun(out: Path, runs: int, env: dict[str, str], nproc: int) -> None:
    kept = 0
    for run in range(1, runs + 1):
        command = [
            sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
            "--master-port", str(29700 + run), str(PROGRAMS / "teardown_race.py"),
        ]  # fmt: skip
        result = subprocess.run(
            command, capture_output=True, text=True, env={**os.environ, **env}, check=False
        )
        print(f"run {run}: exit {result.returncode}", flush=True)
        if result.returncode == 0:
            continue
        kept += 1
        (out / f"torchrun-{kept}.log").write_text(result.stdout + result.stderr)
        meta = {
            "run": run,
            "runs": runs,
            "env": env,
            "command": command[1:],
            "exit_code": result.returncode,
        }
        (out / f"torchrun-{kept}.json").write_text(json.dumps(meta, indent=1) + "\n")


def teardown(out: Path, runs: int, env: dict[str, str]) -> None:
    home = Path(tempfile.mkdtemp(prefix="anylaunch-record-"))
    job_file = _job_file(home, "teardown_race.py", env)
    kept = 0
    for run in range(1, runs + 1):
        result = _anylaunch("run", str(job_file), "--json", env={"ANYLAUNCH_HOME": str(home)})
        job = json.loads(result.stdout)
        print(f"run {run}: {job['state']} exit {job.get('exit_code')}", flush=True)
        if job["state"] == "SUCCEEDED":
            continue
        kept += 1
        log = _anylaunch("logs", job["id"], env={"ANYLAUNCH_HOME": str(home)}).stdout
        (out / f"teardown-{kept}.log").write_text(log)
        meta = {
            "run": run,
            "runs": runs,
            "env": env,
            **{k: job.get(k) for k in ("state", "exit_code")},
        }
        (out / f"teardown-{kept}.json").write_text(json.dumps(meta, indent=1) + "\n")


def _ranks(job_id: str) -> list[tuple[int, int, int]]:
    """(rank, node, pid) of every rank process of the job."""
    found = []
    for proc in psutil.process_iter():
        try:
            environ = proc.environ()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if (
            environ.get("ANYLAUNCH_JOB_ID") == job_id
            and "RANK" in environ
            and "LOCAL_RANK" in environ
        ):
            found.append((int(environ["RANK"]), int(environ["GROUP_RANK"]), proc.pid))
    return sorted(found)


def hang(out: Path, seconds: int = 60) -> None:
    home = Path(tempfile.mkdtemp(prefix="anylaunch-record-"))
    job_file = _job_file(home, "hang.py", {})
    env = {"ANYLAUNCH_HOME": str(home)}
    job = json.loads(_anylaunch("run", str(job_file), "--detach", "--json", env=env).stdout)
    pyspy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    try:
        deadline = time.monotonic() + 300
        while _anylaunch("logs", job["id"], env=env).stdout.count(": step 1") < 4:
            if time.monotonic() > deadline:
                raise SystemExit("the ranks did not all print their step in 300 s")
            time.sleep(2)
        time.sleep(seconds)  # nobody writes: the watchdog's quiet period
        block = [HANG_LINE.format(seconds=seconds)]
        for rank, node, pid in _ranks(job["id"]):
            dump = subprocess.run(
                [pyspy, "dump", "--pid", str(pid)], capture_output=True, text=True
            )
            block += [RANK_LINE.format(rank=rank, node=node, pid=pid), dump.stdout.rstrip("\n")]
        log = _anylaunch("logs", job["id"], env=env).stdout
        (out / "hang.log").write_text(log + "\n".join(block) + "\n")
    finally:
        _anylaunch("cancel", job["id"], env=env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["teardown", "hang"])
    parser.add_argument("out", type=Path)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--torchrun", type=int, metavar="NPROC")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    env = dict(item.split("=", 1) for item in args.env)
    if args.what == "teardown" and args.torchrun:
        teardown_torchrun(args.out, args.runs, env, args.torchrun)
    elif args.what == "teardown":
        teardown(args.out, args.runs, env)
    else:
        hang(args.out)


if __name__ == "__main__":
    main()
