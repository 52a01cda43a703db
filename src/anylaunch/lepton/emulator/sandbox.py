"""Worker names that resolve: a per-job loopback subnet and a private /etc/hosts.

On Lepton, `worker-<i>.<job>-job-svc` is a DNS name inside the job's service subdomain.
Here each job gets its own addresses in 127.0.0.0/8 (so two jobs can both listen on
MASTER_PORT 29400), and each replica runs in a fresh mount + UTS namespace where
/etc/hosts lists the job's workers and the hostname is the worker's own name.
Nothing outside the namespace changes. Without namespaces (no unshare, no privilege)
replicas run directly and only single-worker jobs can resolve their names.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path

_WRAPPER = 'mount --bind "$1" /etc/hosts && hostname "$2" && shift 2 && exec "$@"'


def job_addresses(slot: int, workers: int) -> list[str]:
    """Loopback addresses of a job's workers: 127.<b>.<c>.<i+1>, one /24 per job slot."""
    b, c = 100 + (slot // 250) % 150, slot % 250 + 1
    return [f"127.{b}.{c}.{i + 1}" for i in range(workers)]


def write_hosts(path: Path, names: list[list[str]], addresses: list[str]) -> Path:
    """This machine's hosts file plus one line per worker (all its names)."""
    try:
        base = Path("/etc/hosts").read_text()
    except OSError:
        base = "127.0.0.1 localhost\n"
    lines = [f"{addr} {' '.join(aliases)}" for addr, aliases in zip(addresses, names, strict=True)]
    path.write_text(
        base.rstrip("\n") + "\n# lepton emulator: this job's workers\n" + "\n".join(lines) + "\n"
    )
    return path


@functools.lru_cache(maxsize=1)
def namespaces_work() -> bool:
    """Whether `unshare --mount --uts` with a bind mount works here (root or userns)."""
    if shutil.which("unshare") is None:
        return False
    try:
        probe = subprocess.run(
            ["unshare", "--mount", "--uts", "--propagation", "private", "sh", "-c",
             'mount --bind /etc/hosts /etc/hosts && hostname lepton-probe'],
            capture_output=True, timeout=10, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def wrap(argv: list[str], hosts: Path, hostname: str) -> list[str]:
    """`argv` run inside a private namespace that sees `hosts` as /etc/hosts."""
    if not namespaces_work():
        return argv
    return [
        "unshare", "--mount", "--uts", "--propagation", "private",
        "sh", "-c", _WRAPPER, "lepton-replica", str(hosts), hostname, *argv,
    ]  # fmt: skip
