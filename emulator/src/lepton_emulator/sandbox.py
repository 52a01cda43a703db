"""Each replica in its own root: the image's files, its declared mounts, nothing else.

On Lepton, `worker-<i>.<job>-job-svc` is a DNS name inside the job's service subdomain.
Here each job gets its own addresses in 127.0.0.0/8, on the `lo` of the job's own network
namespace (network.py: so two jobs can both listen on MASTER_PORT 29400), and each
replica runs in a fresh mount + UTS namespace (`unshare`, as root) whose hostname is the
worker's own name and whose root is a private tmpfs holding only:

- the system's /usr and /etc (read-only /usr, the distribution's Python packages hidden),
  /dev, /proc, /sys, an empty /tmp, and /etc/hosts listing the job's workers;
- the directories of the image profile (images.py), read-only under /opt/image;
- the replica's home (its working directory);
- each declared mount, bound from the emulator's volume directory at its mount path.

So an undeclared path, the project's checkout and its virtualenv are simply absent,
as they would be in a container. Nothing outside the namespace changes. Without
namespaces (no unshare, no privilege) replicas run directly on this machine's network and
only single-worker jobs can resolve their names; two multi-worker jobs at once then meet
on MASTER_PORT 29400, and the strict-image and network tests skip.
"""

from __future__ import annotations

import functools
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from lepton_emulator.images import Profile

_TOP_DIRS = ("usr", "etc", "dev", "proc", "sys")
_LINKS = ("bin", "lib", "lib64", "sbin")  # usr-merged systems: links into /usr


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


def wrap(
    argv: Sequence[str],
    *,
    root: Path,
    hosts: Path,
    hostname: str,
    image: Profile,
    home: Path,
    mounts: Sequence[tuple[Path, str]],
) -> list[str]:
    """`argv` run as the replica: chrooted into a private root built under `root`."""
    if not namespaces_work():
        return list(argv)
    root.mkdir(parents=True, exist_ok=True)
    q = shlex.quote
    r = q(str(root))
    lines = ["set -e", f"mount -t tmpfs -o mode=755 lepton-root {r}"]
    for top in _TOP_DIRS:
        lines.append(f"mkdir -p {r}/{top} && mount --rbind /{top} {r}/{top}")
    lines.append(f"mount -o remount,bind,ro {r}/usr")
    for link in _LINKS:
        host = Path("/") / link
        if host.is_symlink():
            lines.append(f"ln -s {q(str(host.readlink()))} {r}/{link}")
        elif host.is_dir():
            lines.append(f"mkdir -p {r}/{link} && mount --rbind /{link} {r}/{link}")
    lines.append(f"mkdir -m 1777 {r}/tmp")
    lines.append(f"mount --bind {q(str(hosts))} {r}/etc/hosts")
    for hidden in image.hidden:
        lines.append(
            f"if [ -d {r}{q(hidden)} ]; then mount -t tmpfs -o ro,mode=755 none {r}{q(hidden)}; fi"
        )
    for seen, inside in image.binds:
        lines.append(f"mkdir -p {r}{q(inside)} && mount --rbind {q(seen)} {r}{q(inside)}")
        lines.append(f"mount -o remount,bind,ro {r}{q(inside)} || true")
    home.mkdir(parents=True, exist_ok=True)
    lines.append(f"mkdir -p {r}{q(str(home))} && mount --bind {q(str(home))} {r}{q(str(home))}")
    for source, target in mounts:
        source.mkdir(parents=True, exist_ok=True)
        lines.append(f"mkdir -p {r}{q(target)} && mount --bind {q(str(source))} {r}{q(target)}")
    lines.append(f"hostname {q(hostname)}")
    lines.append(f'exec chroot {r} /bin/sh -c \'cd "$0" && exec "$@"\' {q(str(home))} "$@"')
    return [
        "unshare", "--mount", "--uts", "--propagation", "private",
        "sh", "-c", "\n".join(lines), "lepton-replica", *argv,
    ]  # fmt: skip
