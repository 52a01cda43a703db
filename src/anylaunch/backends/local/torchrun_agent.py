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
stay exactly torchrun's.

A second difference, on every node: a rank that aborts in Python's own teardown after
its program ended well is not a failure. torch's gloo process group, left for the
interpreter to destroy, sometimes aborts the rank at exit ("terminate called without an
active exception", SIGABRT) after every rank finished its work; torchrun then fails the
node and stops its other ranks, and the other nodes' agents wait out their exit barrier
for it. Python ranks run through this file (`--anylaunch-script` or `--anylaunch-module`,
the script by `runpy` as `torchrun --run-path` does), which leaves a mark named by the
rank's pid once the program returned or exited 0 and its exit handlers ran. Only a
SIGABRT after that mark counts as exit 0, said in the log; any other end of a rank,
an abort during the work or in the program's own exit handlers included, stays
torchrun's. Ranks started with `--no-python` run unwrapped.

Needs only the standard library and torch.
"""

import atexit
import os
import runpy
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
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


# The folder where ranks leave their marks: set by the agent, read by its ranks.
_ENDS_VAR = "ANYLAUNCH_RANK_ENDS"
_SCRIPT, _MODULE = "--anylaunch-script", "--anylaunch-module"


def _run_ranks_through_this_file() -> None:
    """Start each Python rank as `python -u <this file> --anylaunch-script SCRIPT ...`
    (or `--anylaunch-module MODULE ...`) instead of `python -u SCRIPT ...`."""
    import torch.distributed.run

    run: Any = torch.distributed.run
    config_from_args = run.config_from_args

    def wrapped(args: Any) -> Any:
        config, cmd, cmd_args = config_from_args(args)
        if args.no_python or args.run_path or cmd_args[:1] != ["-u"]:
            return config, cmd, cmd_args
        rest = cmd_args[1:]
        if rest[:1] == ["-m"]:
            return config, cmd, ["-u", __file__, _MODULE, *rest[1:]]
        return config, cmd, ["-u", __file__, _SCRIPT, *rest]

    run.config_from_args = wrapped


def _forgive_teardown_aborts(ends: Path) -> None:
    """A rank that ended by SIGABRT after leaving its mark counts as exit 0."""
    from torch.distributed.elastic.multiprocessing import api

    context: Any = api.SubprocessContext
    capture = context._capture_process_failures

    def wrapped(self: Any, done_local_ranks: set[int]) -> None:
        for local_rank in self._running_local_ranks:
            proc = self.subprocess_handlers[local_rank].proc
            if proc.poll() == -signal.SIGABRT and (ends / str(proc.pid)).exists():
                proc.returncode = 0  # what torchrun reads next, in `capture`
                print(
                    f"anylaunch: local rank {local_rank} (pid {proc.pid}) aborted (SIGABRT) in"
                    " Python's teardown after its program ended with exit status 0 and its"
                    " exit handlers ran: counted as exit status 0",
                    file=sys.stderr,
                    flush=True,
                )
        capture(self, done_local_ranks)

    context._capture_process_failures = wrapped


def _rank(argv: list[str]) -> None:
    """Run one rank's program as `python` would, then leave the mark if it ended well.

    The mark's exit handler is registered before the program runs, so it runs after
    every exit handler of the program's own (they run last registered first)."""
    ended_well = False

    def mark() -> None:
        ends = os.environ.get(_ENDS_VAR)
        if ended_well and ends:
            Path(ends, str(os.getpid())).touch()

    atexit.register(mark)
    how, target, *args = argv
    try:
        if how == _MODULE:
            sys.argv = [target, *args]
            sys.path[0] = os.getcwd()
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.argv = [target, *args]
            sys.path[0] = os.path.dirname(os.path.realpath(target))  # as python does
            runpy.run_path(target, run_name="__main__")
    except SystemExit as exc:
        ended_well = exc.code is None or exc.code == 0
        raise
    ended_well = True


def main() -> None:
    if sys.argv[1:2] in ([_SCRIPT], [_MODULE]):
        _rank(sys.argv[1:])
        return
    release = os.environ.get("ANYLAUNCH_RDZV_RELEASE")
    parent = os.getppid()
    held = _hold_stores() if release else []
    ends = Path(tempfile.mkdtemp(prefix="anylaunch-rank-ends-"))
    os.environ[_ENDS_VAR] = str(ends)
    _run_ranks_through_this_file()
    _forgive_teardown_aborts(ends)
    from torch.distributed.run import main as torchrun

    # A failure or a signal raises out of torchrun: the job is ending, and the supervisor
    # stops the other nodes itself, so only a normal return holds the store.
    try:
        torchrun()
    finally:
        shutil.rmtree(ends, ignore_errors=True)
    if release and held:
        _wait_for(release, parent)


if __name__ == "__main__":
    if sys.argv[1:2] not in ([_SCRIPT], [_MODULE]):
        sys.argv[0] = "torchrun"
    main()
