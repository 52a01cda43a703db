"""Record real logs for the diagnosis corpus, the way the corpus' teardown and hang cases
were made: real jobs of the local backend (torchrun on CPU, gloo, 2 nodes x 2 ranks),
their logs as `anylaunch logs JOB` prints them.

    python tests/diagnose/record_logs.py teardown OUT [--runs N] [--env KEY=VALUE ...]
        [--torchrun NPROC]
        runs tests/programs/teardown_race.py N times and keeps the log of every run
        that did not succeed (OUT/teardown-K.log, with its state and exit code in
        OUT/teardown-K.json); with --torchrun, under one torchrun of NPROC ranks
        instead of the local backend (faster: the race needs many runs)
    python tests/diagnose/record_logs.py hang OUT [--idle 45s]
        runs tests/programs/hang.py with the hang watchdog (`watchdog: {idle: ...}`;
        py-spy from the `live` extra) and writes its log to OUT/hang.log: the ranks'
        lines, the watchdog's report (its line, then each rank's py-spy dump) and the
        job being stopped. An idle shorter than the ranks take to import torch catches
        them importing it.

Not a test: it takes minutes and its result depends on timing (the teardown race shows
in some runs only). Run it under an ANYLAUNCH_HOME of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ROOT / "tests" / "programs"


def _anylaunch(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "anylaunch", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        check=False,
    )


def _job_file(folder: Path, program: str, env: dict[str, str], watchdog: str = "") -> Path:
    lines = [
        f"name: {Path(program).stem.replace('_', '-')}",
        f"command: python {program}",
        "nodes: 2",
        "gpus_per_node: 2",
        "env:",
        "  OMP_NUM_THREADS: '1'",
        *(f"  {key}: '{value}'" for key, value in env.items()),
        *([f"watchdog: {{idle: {watchdog}}}"] if watchdog else []),
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


def hang(out: Path, idle: str) -> None:
    home = Path(tempfile.mkdtemp(prefix="anylaunch-record-"))
    job_file = _job_file(home, "hang.py", {}, watchdog=idle)
    env = {"ANYLAUNCH_HOME": str(home)}
    job = json.loads(_anylaunch("run", str(job_file), "--json", env=env).stdout)
    print(f"{job['state']} exit {job.get('exit_code')}: {job.get('detail')}", flush=True)
    (out / "hang.log").write_text(_anylaunch("logs", job["id"], env=env).stdout)
    meta = {"idle": idle, **{k: job.get(k) for k in ("state", "exit_code", "detail")}}
    (out / "hang.json").write_text(json.dumps(meta, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["teardown", "hang"])
    parser.add_argument("out", type=Path)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--torchrun", type=int, metavar="NPROC")
    parser.add_argument("--idle", default="45s", help="the hang watchdog's idle time")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    env = dict(item.split("=", 1) for item in args.env)
    if args.what == "teardown" and args.torchrun:
        teardown_torchrun(args.out, args.runs, env, args.torchrun)
    elif args.what == "teardown":
        teardown(args.out, args.runs, env)
    else:
        hang(args.out, args.idle)


if __name__ == "__main__":
    main()
