"""Nsight Systems profiling on the local backend: the command runs under nsys,
status and logs say where the reports are, and long runs are refused unless forced.

Nsight Systems cannot be installed on this machine (no NVIDIA repository, no GPU), so a
stand-in `nsys` on PATH records its arguments, writes the report file nsys would write,
and runs the profiled command — everything around it is the real code path.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

STAND_IN = """#!/bin/bash
# usage: nsys profile -o REPORT --force-overwrite=true [args...] COMMAND...
shift; out=$2; shift 3
echo "nsys-stand-in report=$out" >&2
: > "$out.nsys-rep"
exec "$@"
"""


def _stand_in(tmp_path: Path) -> dict[str, str]:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    nsys = bindir / "nsys"
    nsys.write_text(STAND_IN)
    nsys.chmod(nsys.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{bindir}:{os.environ['PATH']}"}


def test_reports_of_each_node_are_listed_by_status_and_logs(cli, write, tmp_path):
    env = _stand_in(tmp_path)
    path = write(
        "launcher: none\nnodes: 2\ncommand: [echo, trained]\nprofile: {nsys: true, force: true}\n"
    )
    result = cli("run", str(path), "--json", env=env)
    assert result.rc == 0, result.err
    job = result.json()
    status = cli("status", job["id"], "--json", env=env).json()
    names = [Path(p).name for p in status["reports"]]
    assert names == [f"{job['id']}-node0.nsys-rep", f"{job['id']}-node1.nsys-rep"]
    logs = cli("logs", job["id"], env=env)
    assert "[node 1] trained" in logs.out
    assert f"anylaunch: nsys report: {status['reports'][1]}" in logs.err


def test_profiling_a_long_run_is_refused_unless_forced(cli_inproc, write):
    long_run = write(
        'launcher: none\ncommand: [true]\nprofile: {nsys: true}\nslurm: {time: "04:00:00"}\n'
    )
    refused = cli_inproc("run", str(long_run), env={"SLURM_CONF": "/nonexistent"})
    assert (
        refused.rc == 2
        and "over profile.max_minutes (30)" in refused.err
        and "profile.force" in refused.err
    )
    checks = cli_inproc(
        "preflight",
        str(long_run),
        "--set",
        "profile.force=true",
        "--json",
        env={"SLURM_CONF": "/nonexistent"},
    )
    assert {"name": "profile_length", "status": "ok"}.items() <= next(
        c for c in checks.json()["checks"] if c["name"] == "profile_length"
    ).items()
