# Sourced by the devstack services (not a service itself: no executable bit).
#
# Ports belong to a checkout, not to the machine: two clones of this repository run their
# devstacks side by side, so no service listens on a fixed port. The first `up` picks free
# ports and remembers them in STATE_DIR/ports (NAME=PORT lines); every later `up`,
# `status` and `down` of that checkout reads them back, so a second `up` finds its
# services where it left them. Picks come from 20000-31999, below Linux's ephemeral range
# (32768+), so an outgoing connection does not take a remembered port between two runs.
# A machine-wide claims file keeps two checkouts that pick at the same moment apart.

devstack_claims_dir=${DEVSTACK_CLAIMS_DIR:-/tmp/anylaunch-devstack}

# devstack_port_get STATE_DIR NAME: the remembered port, or nothing
devstack_port_get() {
  [ -f "$1/ports" ] || return 0
  sed -n "s/^$2=\([0-9][0-9]*\)\$/\1/p" "$1/ports" | tail -n 1
}

# devstack_port_set STATE_DIR NAME PORT: remember PORT (e.g. adopted from a running service)
devstack_port_set() {
  local kept=""
  [ -f "$1/ports" ] && kept=$(grep -v "^$2=" "$1/ports" || true)
  printf '%s\n%s=%s\n' "$kept" "$2" "$3" | sed '/^$/d' >"$1/ports.tmp"
  mv "$1/ports.tmp" "$1/ports"
}

# devstack_ports_free FIRST [COUNT]: all of FIRST..FIRST+COUNT-1 can be bound right now
devstack_ports_free() {
  python3 - "$1" "${2:-1}" <<'PY'
import socket, sys
first, count = int(sys.argv[1]), int(sys.argv[2])
for port in range(first, first + count):
    with socket.socket() as s:
        # As the daemons bind: connections of a stopped server left in TIME_WAIT do not
        # make its port taken, a listener on 0.0.0.0 or 127.0.0.1 does.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            sys.exit(1)
PY
}

# devstack_port STATE_DIR NAME [COUNT] [fresh]: the first of COUNT consecutive ports for
# NAME. The remembered one is kept; with `fresh` (the caller is about to start the
# service) a remembered port that something else now holds is replaced by a new pick.
devstack_port() {
  local state=$1 name=$2 count=${3:-1} fresh=${4:-} port
  port=$(devstack_port_get "$state" "$name")
  if [ -n "$port" ] && { [ "$fresh" != fresh ] || devstack_ports_free "$port" "$count"; }; then
    echo "$port"
    return 0
  fi
  mkdir -p "$devstack_claims_dir"
  port=$(
    exec 9>"$devstack_claims_dir/lock"
    flock 9
    python3 - "$count" "$devstack_claims_dir/claims" "$state" <<'PY'
import os, random, socket, sys
count, claims, state = int(sys.argv[1]), sys.argv[2], os.path.realpath(sys.argv[3])
held = []  # claims of checkouts that still exist, other than this one's stale ones
try:
    for line in open(claims):
        words = line.split()
        if len(words) == 3 and os.path.isdir(words[2]):
            held.append(words)
except FileNotFoundError:
    pass
taken = {p for first, n, _ in held for p in range(int(first), int(first) + int(n))}

def free(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False

for _ in range(2000):
    first = random.randrange(20000, 32000 - count)
    ports = range(first, first + count)
    if not taken.intersection(ports) and all(free(p) for p in ports):
        break
else:
    sys.exit("no free port range in 20000-31999")
held.append([str(first), str(count), state])
with open(claims + ".tmp", "w") as out:
    out.writelines(" ".join(words) + "\n" for words in held)
os.replace(claims + ".tmp", claims)
print(first)
PY
  ) || return 1
  devstack_port_set "$state" "$name" "$port"
  echo "$port"
}
