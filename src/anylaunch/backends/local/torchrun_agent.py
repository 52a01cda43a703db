"""torchrun for one simulated node, whose rendezvous store outlives the other nodes.

The local backend runs this file (copied into the job's folder, so any interpreter with
torch can run it) instead of `python -m torch.distributed.run`. It is torchrun itself
with one difference on node 0 of a multi-node job. Under static rendezvous node 0's agent
hosts the TCPStore every agent meets in, and torch's agents leave their exit barrier
independently: node 0's agent can pass the barrier and exit while another node's agent
still waits for the barrier's answer from that store, which then logs "Error waiting on
exit barrier ... Connection was likely closed". On a real cluster this is rare (nodes end
at different times anyway); with several simulated nodes on one machine it shows in about
one run in thirty.

So when ANYLAUNCH_RDZV_RELEASE names a file, this agent keeps the store it hosts open
after torchrun returns, until the supervisor creates that file: the supervisor does so
once every other node's process has ended. torchrun's exit status, output and failures
stay exactly torchrun's. Needs only the standard library and torch.
"""

import os
import sys
import time
from typing import Any

# An agent that is never released (a supervisor that died is handled by the parent-death
# signal) still ends: as long as torchrun's own exit barrier timeout.
_MAX_HOLD_S = 300.0


def _hold_stores() -> list[Any]:
    """Keep every TCPStore the static rendezvous makes alive past torchrun's return."""
    held: list[Any] = []
    try:
        from torch.distributed.elastic.rendezvous import static_tcp_rendezvous
    except ImportError:
        return held
    # The module's TCPStore (a class) is replaced by a factory that remembers what it made.
    static: Any = static_tcp_rendezvous
    make = getattr(static, "TCPStore", None)
    if make is None:
        return held

    def keep(*args: Any, **kwargs: Any) -> Any:
        store = make(*args, **kwargs)
        held.append(store)
        return store

    static.TCPStore = keep
    return held


def _wait_for(release: str, parent: int) -> None:
    deadline = time.monotonic() + _MAX_HOLD_S
    while not os.path.exists(release) and time.monotonic() < deadline:
        if os.getppid() != parent:  # the supervisor is gone: nobody will release us
            return
        time.sleep(0.05)


def main() -> None:
    release = os.environ.get("ANYLAUNCH_RDZV_RELEASE")
    parent = os.getppid()
    held = _hold_stores() if release else []
    from torch.distributed.run import main as torchrun

    # A failure or a signal raises out of torchrun: the job is ending, and the supervisor
    # stops the other nodes itself, so only a normal return holds the store.
    torchrun()
    if release and held:
        _wait_for(release, parent)


if __name__ == "__main__":
    sys.argv[0] = "torchrun"
    main()
