"""Each replica in a container of its own: the image's files, its declared mounts, its
own processes, and none of the privileges that would reach past them.

On Lepton, `worker-<i>.<job>-job-svc` is a DNS name inside the job's service subdomain.
Here each job gets its own addresses in 127.0.0.0/8, on the `lo` of the job's own network
namespace (network.py: so two jobs can both listen on MASTER_PORT 29400), and each
replica runs in fresh mount, UTS and PID namespaces (`unshare`, as root) whose hostname
is the worker's own name and whose root (a private tmpfs, made the root with
`pivot_root`, the host's root unmounted from it) holds only:

- the system's /usr (read-only, the distribution's Python packages hidden);
- an /etc of the image's own: a read-only copy of the few files a program reads there
  (users, name service, loader, certificates; never /etc/shadow or a host key), and an
  /etc/hosts as a kubelet writes it: the replica's own address and names (its hostname,
  `worker-<i>`, resolves), and the job's other workers when the job may reach them;
- a /proc of its own PID namespace, so no process of the host or of another job is in
  it; a read-only /sys; a /dev of the harmless devices only, with its own /dev/shm; an
  empty /tmp;
- the directories of the image profile (images.py), read-only under /opt/image;
- the replica's home (its working directory);
- each declared mount, bound from the emulator's volume directory at its mount path.

So an undeclared path, the project's checkout and its virtualenv are simply absent,
as they would be in a container. The replica runs as root, as in most images, but with
a container runtime's capabilities (setpriv: no CAP_SYS_ADMIN, so no mount and no setns
into another namespace; no CAP_MKNOD, so no device node of the host's disk; no new
privileges through setuid files). Its first process is a small shell that hands SIGTERM
on to the command, so a stop reaches the program as a node's SIGTERM does. Nothing
outside the namespaces changes. Without namespaces (no unshare, no privilege) replicas
run directly on this machine and none of this holds: the strict-image, isolation and
network tests skip there.
"""

from __future__ import annotations

import functools
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from lepton_emulator.images import Profile

_LINKS = ("bin", "lib", "lib64", "sbin")  # usr-merged systems: links into /usr


def job_addresses(slot: int, workers: int) -> list[str]:
    """Loopback addresses of a job's workers: 127.<b>.<c>.<i+1>, one /24 per job slot."""
    b, c = 100 + (slot // 250) % 150, slot % 250 + 1
    return [f"127.{b}.{c}.{i + 1}" for i in range(workers)]


# The lines a kubelet puts first in every pod's /etc/hosts.
_KUBELET_HOSTS = """# Kubernetes-managed hosts file.
127.0.0.1\tlocalhost
::1\tlocalhost ip6-localhost ip6-loopback
fe00::0\tip6-localnet
fe00::0\tip6-mcastprefix
fe00::1\tip6-allnodes
fe00::2\tip6-allrouters
"""


def write_hosts(
    path: Path, own: tuple[str, list[str]], others: Sequence[tuple[str, list[str]]] = ()
) -> Path:
    """A replica's hosts file: the kubelet's lines, the replica's own address with all its
    names (so its hostname resolves), then the job's other workers it may reach."""
    lines = [f"{address}\t{' '.join(names)}" for address, names in (own, *others)]
    path.write_text(_KUBELET_HOSTS + "\n".join(lines) + "\n")
    return path


# What a container runtime leaves root in a container (Docker's default set), less
# CAP_MKNOD and CAP_SETFCAP: without a device cgroup a device node would reach the host's
# disks. Never CAP_SYS_ADMIN (mount, setns, unshare) nor CAP_SYS_PTRACE.
CAPABILITIES = (
    "chown", "dac_override", "fowner", "fsetid", "kill", "setgid", "setuid", "setpcap",
    "net_bind_service", "net_raw", "sys_chroot", "audit_write",
)  # fmt: skip
_DEVICES = ("null", "zero", "full", "random", "urandom")
# Read-only in a replica's /proc, as a container runtime makes them: writing
# /proc/sysrq-trigger or /proc/sys needs no capability, only uid 0, and reaches the kernel
# every job shares.
_PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")
_TOOLS = ("unshare", "setpriv", "pivot_root", "mount", "umount")

# The replica's first process (PID 1 of its namespace). A PID 1 gets only the signals it
# has a handler for, so a program started as PID 1 would never see the SIGTERM of a stop:
# this shell traps it and hands it on, then ends with the program's exit status.
_INIT = """
cd "$1" || exit 127
shift
trap 'kill -TERM "$child" 2>/dev/null' TERM
trap 'kill -INT "$child" 2>/dev/null' INT
"$@" &
child=$!
while :; do
  wait "$child"
  code=$?
  kill -0 "$child" 2>/dev/null || exit "$code"
done
"""


@functools.lru_cache(maxsize=1)
def namespaces_work() -> bool:
    """Whether replicas can have their own mount, UTS and PID namespaces here (root)."""
    if any(shutil.which(tool) is None for tool in _TOOLS):
        return False
    try:
        probe = subprocess.run(
            ["unshare", "--mount", "--uts", "--pid", "--fork", "--propagation", "private",
             "sh", "-c", "mount --bind /etc/hosts /etc/hosts && hostname lepton-probe"],
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
    etc: Path,
    home: Path,
    mounts: Sequence[tuple[Path, str]],
) -> list[str]:
    """`argv` run as the replica: in its own namespaces, its root the tree built under
    `root`, its /etc a read-only bind of `etc` (images.image_etc)."""
    if not namespaces_work():
        return list(argv)
    root.mkdir(parents=True, exist_ok=True)
    q = shlex.quote
    r = q(str(root))
    lines = ["set -e", f"mount -t tmpfs -o mode=755 lepton-root {r}"]
    lines.append(f"mkdir {r}/usr && mount --rbind /usr {r}/usr")
    lines.append(f"mount -o remount,bind,ro {r}/usr")
    for link in _LINKS:
        host = Path("/") / link
        if host.is_symlink():
            lines.append(f"ln -s {q(str(host.readlink()))} {r}/{link}")
        elif host.is_dir():
            lines.append(f"mkdir -p {r}/{link} && mount --rbind /{link} {r}/{link}")
            lines.append(f"mount -o remount,bind,ro {r}/{link}")
    lines.append(f"mkdir {r}/etc && mount --bind {q(str(etc))} {r}/etc")
    lines.append(f"mount -o remount,bind,ro {r}/etc")
    lines.append(f"mount --bind {q(str(hosts))} {r}/etc/hosts")
    lines.append(f"mkdir {r}/dev && mount -t tmpfs -o mode=755,nosuid lepton-dev {r}/dev")
    for device in _DEVICES:
        lines.append(f"touch {r}/dev/{device} && mount --bind /dev/{device} {r}/dev/{device}")
    lines.append(
        f"mkdir -m 1777 {r}/dev/shm && mount -t tmpfs -o mode=1777,nosuid,nodev shm {r}/dev/shm"
    )
    lines.append(f"ln -s /proc/self/fd {r}/dev/fd")
    for number, stream in enumerate(("stdin", "stdout", "stderr")):
        lines.append(f"ln -s /proc/self/fd/{number} {r}/dev/{stream}")
    lines.append(f"mkdir {r}/sys && mount -t sysfs -o ro,nosuid,nodev,noexec sysfs {r}/sys")
    lines.append(f"mkdir {r}/proc")
    lines.append(f"mkdir -m 1777 {r}/tmp")
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
        lines.append(f"mkdir -p {r}{q(target)} && mount --bind {q(str(source))} {r}{q(target)}")
    lines.append(f"hostname {q(hostname)}")
    # The tree becomes the root and the host's root goes: no path leads back to it, not
    # even /proc/1/root of this namespace's first process.
    lines.append(f"cd {r} && mkdir .host-root && pivot_root . .host-root && cd /")
    lines.append("mount -t proc -o nosuid,nodev,noexec proc /proc")
    for path in _PROC_READ_ONLY:  # root may write these without any capability
        lines.append(f"if [ -e {path} ]; then mount --bind -o ro {path} {path}; fi")
    lines.append("umount -l /.host-root && rmdir /.host-root")
    bounding = ",".join(["-all", *(f"+{cap}" for cap in CAPABILITIES)])
    lines.append(
        f"exec setpriv --bounding-set={bounding} --inh-caps=-all --no-new-privs --"
        f' /bin/sh -c {q(_INIT)} lepton-init {q(str(home))} "$@"'
    )
    return [
        "unshare", "--mount", "--uts", "--pid", "--fork", "--kill-child",
        "--propagation", "private",
        "sh", "-c", "\n".join(lines), "lepton-replica", *argv,
    ]  # fmt: skip
