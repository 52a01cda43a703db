"""What a hostile replica tries, from inside the emulator's replica (stdlib only).

Arguments: the emulator's pid on the host, its API port, a path that exists only on the
host, then the sha256 digests of values that must stay out of reach (the emulator's
token, another job's secret, the host's /etc/shadow). Each attempt that works prints a
line starting with FOUND; the last line says the probe ran to its end.
"""

import ctypes
import hashlib
import os
import socket
import sys

CLONE_NEWNET = 0x40000000
emulator_pid, api_port, host_only = sys.argv[1], int(sys.argv[2]), sys.argv[3]
wanted = set(sys.argv[4:])


def digest(data):
    return hashlib.sha256(data).hexdigest()


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


seen = [p for p in os.listdir("/proc") if p.isdigit()]
print("processes seen", len(seen), flush=True)
pids = sorted(set(seen) | {emulator_pid}, key=int)

# The host's filesystem through another process's root (/proc/PID/root).
for pid in pids:
    root = f"/proc/{pid}/root"
    try:
        if os.path.exists(root + host_only):
            print("FOUND the host's / through", root)
    except OSError:
        pass
    shadow = read(root + "/etc/shadow")
    if shadow is not None and digest(shadow) in wanted:
        print("FOUND the host's /etc/shadow through", root)
shadow = read("/etc/shadow")
if shadow is not None and digest(shadow) in wanted:
    print("FOUND the host's /etc/shadow at /etc/shadow")

# Secrets in other processes' environments (/proc/PID/environ).
for pid in pids:
    env = read(f"/proc/{pid}/environ")
    for item in (env or b"").split(b"\0"):
        if digest(item.partition(b"=")[2]) in wanted:
            print(f"FOUND a secret in /proc/{pid}/environ")

# Another network namespace (/proc/PID/ns/net), then the emulator's API from it.
libc = ctypes.CDLL(None, use_errno=True)
for pid in pids:
    try:
        fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    except OSError:
        continue
    entered = libc.setns(fd, CLONE_NEWNET) == 0
    os.close(fd)
    if not entered:
        continue
    try:
        with socket.create_connection(("127.0.0.1", api_port), timeout=3) as conn:
            conn.sendall(b"GET /_emulator/healthz HTTP/1.0\r\n\r\n")
            if b"ok" in conn.recv(4096):
                print(f"FOUND the emulator's API through /proc/{pid}/ns/net")
    except OSError:
        pass

status = (read("/proc/self/status") or b"").decode()
print(next((line for line in status.splitlines() if line.startswith("CapEff")), "CapEff ?"))
print("probe ran to its end", flush=True)
