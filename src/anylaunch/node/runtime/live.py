"""Reaching a running job from one of its nodes: its environment, its ranks' stacks, and
the hang watchdog.

Runs on the node, with only the standard library: in the zipapp (`anylaunch_job.pyz
enter|stack|watch`), as `python3 -I -S -c <this file's text>` sent through srun or ssh
to a node that has no zipapp, and imported by anylaunch itself for the local backend,
whose nodes are processes of this machine. So this file imports nothing of its siblings.

A job's processes are found by the ANYLAUNCH_JOB_ID every backend gives them. Among
them, a node's are those with its NODE_RANK (every backend exports it before the
program starts), and a rank is a process with RANK (torchrun gives it to each worker,
srun-launched tasks export it). Where several nodes share one machine (the local
backend, a test cluster), SLURMD_NODENAME tells Slurm's nodes apart.

Secrets stay where they are: a command run here gets the node's environment as the
node has it, and what this module prints (stacks, whose command lines may hold a
token) is masked with the values of the rank's secret variables first.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from typing import Any

MASK = "***"
MIN_SECRET = 4  # shorter values ("1", "true") would mask ordinary text everywhere
# Exit status of a job the watchdog stopped: its batch script ends with it.
EXIT_HUNG = 99
HANG_HEAD = (
    "anylaunch: hang: no rank wrote output for {idle}s; the Python stack of every rank follows"
)
HANG_RANK = "anylaunch: hang: rank {rank} (node {node}, pid {pid})"
DUMP_TIMEOUT_S = 30
# Variables that make a process one rank rather than the node: left out of the node's
# environment only when no rank-free process of the node is left to read it from.
_PER_RANK = ("RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "TORCHELASTIC_RESTART_COUNT")


class Proc:
    """One process of the job, as /proc shows it."""

    def __init__(self, pid: int, ppid: int, env: dict[str, str], exe: str) -> None:
        self.pid = pid
        self.ppid = ppid
        self.env = env
        self.exe = exe

    @property
    def python(self) -> bool:
        return os.path.basename(self.exe).startswith("python")


def _ppid(pid: int) -> int:
    with open("/proc/%d/stat" % pid, "rb") as handle:
        stat = handle.read()
    # The command name may hold spaces and parentheses: the fields follow the last ')'.
    return int(stat[stat.rindex(b")") + 2 :].split()[1])


def _environ(pid: int) -> bytes:
    with open("/proc/%d/environ" % pid, "rb") as handle:
        return handle.read()


def _parse_env(raw: bytes) -> dict[str, str]:
    env = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep and name:
            env[name.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return env


def job_processes(job_id: str, host: str | None = None) -> list[Proc]:
    """Every process of the job on this machine (of Slurm node `host` where given)."""
    marker = ("ANYLAUNCH_JOB_ID=%s" % job_id).encode()
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        pid = int(entry)
        try:
            raw = _environ(pid)
            if b"\0" + marker + b"\0" not in b"\0" + raw.rstrip(b"\0") + b"\0":
                continue  # read whole only for the job's own processes
            env = _parse_env(raw)
            if env.get("ANYLAUNCH_JOB_ID") != job_id:
                continue
            if host and env.get("SLURMD_NODENAME", host) != host:
                continue
            try:
                exe = os.readlink("/proc/%d/exe" % pid)
            except OSError:
                exe = ""
            found.append(Proc(pid, _ppid(pid), env, exe))
        except (OSError, ValueError):
            continue  # ended meanwhile, or not ours to read
    return found


def _top(procs: list[Proc]) -> list[Proc]:
    """Those of `procs` whose parent is not among them, by pid."""
    pids = {p.pid for p in procs}
    return sorted((p for p in procs if p.ppid not in pids), key=lambda p: p.pid)


def node_process(procs: list[Proc], node: int) -> Proc | None:
    """The process that holds node `node`'s environment: of the node's processes that are
    not a rank, the one with the most variables (the program or torchrun, which see the
    job's `env:` that the node's shell exported), else the node's first process."""
    mine = [p for p in procs if p.env.get("NODE_RANK") == str(node)]
    if not mine:
        return None
    whole = [p for p in mine if "RANK" not in p.env]
    if whole:
        return sorted(whole, key=lambda p: (-len(p.env), p.pid))[0]
    return _top(mine)[0]


def node_env(proc: Proc) -> dict[str, str]:
    """The node's environment read from `proc`: a rank's own variables are dropped."""
    if "RANK" not in proc.env:
        return dict(proc.env)
    return {k: v for k, v in proc.env.items() if k not in _PER_RANK}


def ranks(procs: list[Proc], node: int | None = None) -> list[dict[str, Any]]:
    """One entry per rank (a dict: rank, local_rank, node, pid), by rank.

    Each rank's process is its first Python process: a rank that torchrun starts through
    `bash -c` is the Python program under that shell, and the rank's own children (data
    loader workers) carry its RANK too.
    """
    if node is not None:
        procs = [p for p in procs if p.env.get("NODE_RANK") == str(node)]
    by_rank: dict[str, list[Proc]] = {}
    for proc in procs:
        if "RANK" in proc.env:
            by_rank.setdefault(proc.env["RANK"], []).append(proc)
    out = []
    for rank, group in by_rank.items():
        pythons = [p for p in group if p.python]
        chosen = _top(pythons)[0] if pythons else _top(group)[0]
        out.append(
            {
                "rank": _int(rank),
                "local_rank": _int(chosen.env.get("LOCAL_RANK")),
                "node": _int(chosen.env.get("NODE_RANK")),
                "pid": chosen.pid,
                "host": chosen.env.get("SLURMD_NODENAME") or socket.gethostname(),
                "_env": chosen.env,
            }
        )
    return sorted(out, key=lambda r: (r["rank"] is None, r["rank"] or 0, r["pid"]))


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def find_py_spy(preferred: str | None) -> str | None:
    """`preferred` (the submitting side's py-spy) when this node sees it, else PATH's."""
    if preferred and os.path.isfile(preferred) and os.access(preferred, os.X_OK):
        return preferred
    return shutil.which("py-spy")


def dump(pid: int, py_spy: str | None) -> tuple[str | None, str | None]:
    """(py-spy's `dump` text, None) or (None, why there is none)."""
    if py_spy is None:
        return None, (
            "py-spy is not on %s: install it there (pip install py-spy), or install"
            " anylaunch[live] where the node sees it" % socket.gethostname()
        )
    try:
        proc = subprocess.run(
            [py_spy, "dump", "--pid", str(pid)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=DUMP_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return None, "py-spy dump did not answer in %ds" % DUMP_TIMEOUT_S
    except OSError as exc:
        return None, "cannot run %s: %s" % (py_spy, exc)
    text = proc.stdout.decode("utf-8", "replace")
    if proc.returncode != 0 or not text.strip():
        error = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        return None, "py-spy: %s" % (error[0] if error else "exit status %d" % proc.returncode)
    return text, None


def secret_values(env: dict[str, str], names: list[str], pattern: str | None) -> set[str]:
    """The values to hide: of the variables named, and of those whose name matches."""
    like = re.compile(pattern, re.IGNORECASE) if pattern else None
    values = {
        v for k, v in env.items() if v and (k in names or (like is not None and like.search(k)))
    }
    return values | {line for v in values for line in v.splitlines() if len(line) >= MIN_SECRET}


def mask(text: str, values: set[str]) -> str:
    for value in sorted((v for v in values if len(v) >= MIN_SECRET), key=len, reverse=True):
        text = text.replace(value, MASK)
    return text


def stacks(
    job_id: str,
    node: int | None,
    py_spy: str | None,
    names: list[str],
    pattern: str | None,
    host: str | None = None,
) -> list[dict[str, Any]]:
    """Every rank of the job here (of `node` where given), each with its stack or why
    it has none, masked with that rank's secret values."""
    found = ranks(job_processes(job_id, host), node)
    tool = find_py_spy(py_spy)
    for rank in found:
        env = rank.pop("_env")
        text, error = dump(rank["pid"], tool)
        hidden = secret_values(env, names, pattern)
        rank["stack"] = mask(text, hidden) if text is not None else None
        rank["error"] = mask(error, hidden) if error is not None else None
    return found


def hang_report(idle_s: float, found: list[dict[str, Any]]) -> str:
    """What the watchdog writes into the job's log before it stops the job."""
    lines = [HANG_HEAD.format(idle=int(idle_s))]
    for rank in sorted(found, key=lambda r: (r["rank"] is None, r["rank"] or 0, r["pid"])):
        lines.append(
            HANG_RANK.format(
                rank="?" if rank["rank"] is None else rank["rank"],
                node="?" if rank["node"] is None else rank["node"],
                pid=rank["pid"],
            )
        )
        body = rank.get("stack") or (rank.get("error") or "no stack") + "\n"
        lines.append(body.rstrip("\n"))
    if not found:
        lines.append("anylaunch: hang: no rank process found (no process with RANK set)")
    return "\n".join(lines) + "\n"


def last_output(paths: list[str], since: float) -> float:
    """When any of the logs last grew (their newest modification, never before `since`)."""
    newest = since
    for path in paths:
        try:
            newest = max(newest, os.stat(path).st_mtime)
        except OSError:
            continue
    return newest


def enter(job_id: str, node: int, argv: list[str], host: str | None = None) -> int:
    """Replace this process by `argv`, run in node `node`'s environment and folder.

    With no `argv`, the node's shell: bash where the node has it, else sh.
    """
    proc = node_process(job_processes(job_id, host), node)
    if proc is None:
        sys.stderr.write(
            "anylaunch: no process of job %s runs node %d on %s (it has not started, or it"
            " ended)\n" % (job_id, node, socket.gethostname())
        )
        return 3
    env = node_env(proc)
    # A node folder gone or unreadable: stay where srun or ssh put us.
    with contextlib.suppress(OSError):
        os.chdir(os.readlink("/proc/%d/cwd" % proc.pid))
    if not argv:
        found = shutil.which("bash", path=env.get("PATH")) or "sh"
        argv = [found]
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        sys.stderr.write(
            "anylaunch: cannot run %s on node %d: %s\n" % (argv[0], node, exc.strerror)
        )
        return 127
    return 0  # not reached: exec replaced this process


def watch(idle_s: float, pid: int, logs: list[str], collect: list[str], log: str) -> int:
    """The watchdog inside a Slurm allocation: while process `pid` (the job's srun) runs,
    wait for `idle_s` seconds without output in `logs`; then run `collect` (a step on
    every node printing `stack` lines), write the report into `log`, stop `pid` and
    return EXIT_HUNG. 0 once `pid` ended by itself. Silence before any rank exists is
    not judged: the clock is the ranks'."""
    started = time.time()
    step = max(0.5, min(idle_s / 10.0, 5.0))
    if pid <= 1:  # never init (or, with 0 or less, a whole process group)
        sys.stderr.write("anylaunch: hang: no job step to watch (pid %d)\n" % pid)
        return 0
    while _alive(pid):
        quiet = time.time() - last_output(logs, started)
        if quiet >= idle_s:
            found = _collect(collect)
            if not found:  # no rank yet (imports, nodes meeting): not the program's silence
                time.sleep(step)
                continue
            with open(log, "a") as handle:
                handle.write(hang_report(quiet, found))
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
            return EXIT_HUNG
        time.sleep(min(step, max(0.1, idle_s - quiet)))
    return 0


def _collect(argv: list[str]) -> list[dict[str, Any]]:
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        sys.stderr.write("anylaunch: hang: cannot collect the stacks: %s\n" % exc)
        return []
    found: list[dict[str, Any]] = []
    for line in proc.stdout.decode("utf-8", "replace").splitlines():
        try:
            found += json.loads(line)["ranks"]
        except (ValueError, KeyError, TypeError):
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pipe(host: str, port: int) -> int:
    """Join standard input and output to a TCP connection to `host:port`, until both
    sides close: one forwarded connection, run on the node through srun or ssh."""
    import select

    try:
        conn = socket.create_connection((host, port), timeout=10)
    except OSError as exc:
        sys.stderr.write(
            "anylaunch: nothing answers on %s:%d on %s: %s\n"
            % (host, port, socket.gethostname(), exc)
        )
        return 1
    conn.settimeout(None)
    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    reading = [stdin, conn]
    while conn in reading:
        ready = select.select(reading, [], [])[0]
        if stdin in ready:
            data = os.read(stdin, 65536)
            if data:
                conn.sendall(data)
            else:  # the local side is done sending: say so, keep reading the answer
                reading.remove(stdin)
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_WR)
        if conn in ready:
            data = conn.recv(65536)
            if not data:
                break
            view = memoryview(data)
            while view:
                view = view[os.write(stdout, view) :]
    conn.close()
    return 0


# The early signal is passed on no later than this long before the time limit.
SIGNAL_MARGIN_S = 2
# Exported by every task of a job's program step (not by the batch shell, not by srun):
# the processes a forwarded signal may reach are among those that have it.
IN_STEP = "ANYLAUNCH_IN_STEP"


def catches(pid: int, signum: int) -> bool:
    """Whether process `pid` has a handler of its own for `signum` (SigCgt in
    /proc/PID/status): one that ignores it, or was never told of it, does not."""
    with open("/proc/%d/status" % pid) as handle:
        for line in handle:
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


def forward(job_id: str, name: str, host: str | None = None) -> list[int]:
    """Send signal `name` to each process of the job's program on this node that handles
    it, and to none that does not: a rank that never asked for it is neither killed by
    it nor made to ignore it (a framework such as Lightning installs its own handler only
    over the default one). A handling process whose ancestor in the job also handles it
    (a data loader's worker, forked with its rank's handlers) is left to that ancestor,
    as a signal sent to each task would reach each rank once. The pids signalled."""
    signum = int(getattr(signal, "SIG" + name))
    procs = [p for p in job_processes(job_id, host) if p.env.get(IN_STEP) == "1"]
    handling: dict[int, Proc] = {}
    for proc in procs:
        with contextlib.suppress(OSError, ValueError):
            if catches(proc.pid, signum):
                handling[proc.pid] = proc
    by_pid = {p.pid: p for p in procs}
    sent = []
    for proc in sorted(handling.values(), key=lambda p: p.pid):
        parent, covered = by_pid.get(proc.ppid), False
        while parent is not None and not covered:
            covered = parent.pid in handling
            parent = by_pid.get(parent.ppid)
        if covered:
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signum)
            sent.append(proc.pid)
    return sent


def pass_on(job_id: str, name: str, ended: str | None, host: str | None) -> int:
    """The early signal, to the ranks here that handle it (`forward`).

    Slurm may send it while the ranks are still starting (on a short limit, as soon as
    the job runs): until one handles it, look again, up to just before the kill, or
    until the file `ended` exists: the batch shell writes it once the program's step has
    ended, when no rank will ever handle it (a file, not a signal: srun drops a signal
    that arrives while it is still starting its step)."""
    deadline = float(os.environ.get("ANYLAUNCH_DEADLINE") or 0) - SIGNAL_MARGIN_S

    def over() -> bool:
        return ended is not None and os.path.exists(ended)

    sent = forward(job_id, name, host)
    while not sent and not over() and time.time() < deadline:
        time.sleep(0.5)
        sent = forward(job_id, name, host)
    if sent:
        pids = ", ".join(map(str, sent))
    elif over():
        pids = "none: the program ended before a rank here handled it"
    else:
        pids = "none: no rank here handles it"
    sys.stdout.write(
        "anylaunch: %s on %s went to %s\n" % (name, host or socket.gethostname(), pids)
    )
    return 0


def main(argv: list[str]) -> int:
    """enter JOB NODE [-- CMD...] | pipe HOST PORT | stack JOB [--node N] [--py-spy P] [--secret NAME]...
    [--secret-pattern RE] | watch --idle S --pid P --log FILE --logs FILE... -- COLLECT...
    | signal JOB NAME [ENDED_FILE]"""
    import argparse

    here = os.environ.get("SLURMD_NODENAME")
    if argv[:1] == ["enter"]:
        rest = argv[1:]
        command = rest[rest.index("--") + 1 :] if "--" in rest else []
        head = rest[: rest.index("--")] if "--" in rest else rest
        if len(head) != 2 or not head[1].isdigit():
            sys.stderr.write("usage: enter JOB NODE [-- COMMAND...]\n")
            return 2
        return enter(head[0], int(head[1]), command, here)
    if argv[:1] == ["stack"]:
        parser = argparse.ArgumentParser(prog="stack")
        parser.add_argument("job")
        parser.add_argument("--node", type=int)
        parser.add_argument("--py-spy", dest="py_spy")
        parser.add_argument("--secret", action="append", default=[])
        parser.add_argument("--secret-pattern")
        args = parser.parse_args(argv[1:])
        found = stacks(args.job, args.node, args.py_spy, args.secret, args.secret_pattern, here)
        sys.stdout.write(json.dumps({"host": socket.gethostname(), "ranks": found}) + "\n")
        return 0
    if argv[:1] == ["signal"] and len(argv) in (3, 4) and hasattr(signal, "SIG" + argv[2]):
        return pass_on(argv[1], argv[2], argv[3] if len(argv) == 4 else None, here)
    if argv[:1] == ["pipe"] and len(argv) == 3 and argv[2].isdigit():
        return pipe(argv[1], int(argv[2]))
    if argv[:1] == ["watch"]:
        rest = argv[1:]
        if "--" not in rest:
            sys.stderr.write(
                "usage: watch --idle S --pid P --log FILE --logs FILE... -- COLLECT...\n"
            )
            return 2
        parser = argparse.ArgumentParser(prog="watch")
        parser.add_argument("--idle", type=float, required=True)
        parser.add_argument("--pid", type=int, required=True)
        parser.add_argument("--log", required=True)
        parser.add_argument("--logs", nargs="+", required=True)
        args = parser.parse_args(rest[: rest.index("--")])
        return watch(args.idle, args.pid, args.logs, rest[rest.index("--") + 1 :], args.log)
    sys.stderr.write((main.__doc__ or "") + "\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
