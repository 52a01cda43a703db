"""The CLI called inside the test process, and the guard that keeps the fast tier honest.

`call` runs `anylaunch ARGS` through the command's own entry point (`anylaunch.cli.main`:
usage errors exit 2, `--json` errors are objects), as `python -m anylaunch` would, minus
the interpreter start and the imports, which are most of a short command's time. What a
separate process would keep to itself is given to the call and taken back after it: the
environment (ANYLAUNCH_HOME included), the working folder, argv and `__main__` (click
names the program from them), the standard streams, signal handlers, the backend
registry and the caches a command leaves in its modules.

A `run` that starts a local job forks the calling process (the local backend's fast
start): from pytest's process that would leave a supervisor the test process is the
parent of. Such a call is an error here; the test uses the subprocess `cli` instead.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path

# Module-level state a command leaves behind: (module, attribute). Caches are emptied
# before each call (a second process would start with none); `_REGISTERED` is put back as
# it was (a test may register a backend for one call). Only modules already imported are
# touched: a call must not import what the command itself would not.
CACHES = (
    ("anylaunch.backends.lepton.resolve", "_shapes"),
    ("anylaunch.backends.skypilot.backend", "_seen"),
    ("anylaunch.backends.skypilot.backend", "_log_text"),
    ("anylaunch.backends.slurm.backend", "_homes"),
    ("anylaunch.backends.slurm.backend", "_copied"),
)
RESTORED = (("anylaunch.backends.registry", "_REGISTERED"),)
# Children a local job's start records in the calling process: one more after a call
# means it started a job from pytest's process.
STARTED = (
    ("anylaunch.backends.local.backend", "_children"),
    ("anylaunch.backends.local.start", "_popens"),
)
SIGNALS = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGCHLD", "SIGPIPE", "SIGUSR1")
    if hasattr(signal, name)
)


def _loaded(module: str, attr: str) -> object | None:
    found = sys.modules.get(module)
    return None if found is None else getattr(found, attr, None)


def _started() -> set[int]:
    pids: set[int] = set()
    for module, attr in STARTED:
        pids |= set(_loaded(module, attr) or ())
    return pids


@contextlib.contextmanager
def _isolated(env: Mapping[str, str], cwd: Path | None) -> Iterator[None]:
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_argv, saved_path = sys.argv, sys.path[:]
    saved_streams = (sys.stdin, sys.stdout, sys.stderr)
    saved_signals = {sig: signal.getsignal(sig) for sig in SIGNALS}
    saved_state = {
        (module, attr): dict(value)
        for module, attr in RESTORED
        if isinstance(value := _loaded(module, attr), dict)
    }
    saved_main = sys.modules["__main__"]
    for module, attr in CACHES:
        cache = _loaded(module, attr)
        if isinstance(cache, dict):
            cache.clear()
    os.environ.clear()
    os.environ.update(env)
    try:
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        sys.modules["__main__"] = saved_main
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        sys.argv = saved_argv
        sys.path[:] = saved_path
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        for sig, handler in saved_signals.items():
            if signal.getsignal(sig) is not handler and handler is not None:
                signal.signal(sig, handler)
        for (module, attr), value in saved_state.items():
            current = importlib.import_module(module).__dict__[attr]
            current.clear()
            current.update(value)


def _as_python_m_anylaunch() -> str:
    """Make `__main__` look as it does under `python -m anylaunch` (click names the
    program in usage messages from it); argv[0] to go with it."""
    import importlib.util
    import types

    spec = importlib.util.find_spec("anylaunch.__main__")
    assert spec is not None and spec.origin is not None
    main = types.ModuleType("__main__")
    main.__spec__, main.__package__, main.__file__ = spec, "anylaunch", spec.origin
    sys.modules["__main__"] = main
    return spec.origin


def _stream() -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue().decode("utf-8", errors="backslashreplace")


def call(args: tuple[str, ...], env: Mapping[str, str], cwd: Path | None) -> tuple[int, str, str]:
    """`anylaunch ARGS` in this process with exactly `env` as its environment: the exit
    status, stdout and stderr, as a separate process would have them."""
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError(
            "the in-process CLI swaps process-wide state: call it from the main thread"
        )
    from anylaunch.cli import main

    before = _started()
    out, err = _stream(), _stream()
    _in_call.clear()
    _in_call.append([])
    with _isolated(env, cwd):
        sys.argv = [_as_python_m_anylaunch(), *args]
        sys.stdin, sys.stdout, sys.stderr = io.StringIO(""), out, err
        try:
            main()
            rc = 0
        except SystemExit as exc:
            rc = _exit_status(exc.code, err)
        except KeyboardInterrupt:
            raise
        except BaseException:
            # What the interpreter does with an exception nobody caught: the traceback on
            # stderr, status 1. A test that asserts "no traceback" still sees one.
            err.write(traceback.format_exc())
            rc = 1
    left = [proc.args for proc in _in_call.pop() if proc.poll() is None]
    if _started() - before or left:
        raise AssertionError(
            f"`anylaunch {' '.join(args)}` started a job or a process that outlives it"
            f" ({left or 'a local job'}) from the test process: use the `cli` fixture (a"
            " separate process) for commands that start jobs"
        )
    return rc, _text(out), _text(err)


def _exit_status(code: object, err: io.TextIOWrapper) -> int:
    """sys.exit's argument as the interpreter turns it into an exit status."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    err.write(f"{code}\n")
    return 1


# The guard: which tests start processes, whether or not they say so; and the processes
# an in-process call started (a list while a call runs).
_spawned: list[str] = []
_in_call: list[list[subprocess.Popen[bytes]]] = []


def _record(what: str) -> None:
    if threading.current_thread() is threading.main_thread():
        _spawned.append(what)


def _is_python(executable: str) -> bool:
    """A Python program: an interpreter or a script run by one (the `anylaunch` console
    script): the CLI, a job's program, the runtime, a server. Quick tools (`bash -n` of a
    rendered script, `ps`) cost milliseconds and leave nothing behind: allowed."""
    if os.path.basename(executable).startswith("python"):
        return True
    try:
        with open(executable, "rb") as file:
            first = file.readline(200)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def install_guard() -> None:
    """Note every Python program the test process starts from its main thread (through
    subprocess or multiprocessing, which both start processes with `fork_exec`), and
    every bare fork: a test that does so must be marked `spawns` (by a fixture), or it
    would pass for a fast, in-process test. Threads are left out: a service a test
    started (the Lepton emulator) runs its jobs from threads of its own. A shell that
    starts Python itself is not seen: such a test asks for `spawns` by hand."""
    import _posixsubprocess

    fork_exec = _posixsubprocess.fork_exec

    def noting_fork_exec(args, executables, *rest):  # type: ignore[no-untyped-def]
        pid = fork_exec(args, executables, *rest)
        found = next((os.fsdecode(e) for e in executables if os.path.exists(e)), None)
        if found and _is_python(found):
            _record(os.fsdecode(args[0]) if args else found)
        return pid

    _posixsubprocess.fork_exec = noting_fork_exec  # multiprocessing's spawn
    subprocess._fork_exec = noting_fork_exec  # type: ignore[attr-defined]  # subprocess's own name for it
    popen_execute = subprocess.Popen._execute_child  # type: ignore[attr-defined]

    def execute_child(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        popen_execute(self, *args, **kwargs)
        if _in_call and threading.current_thread() is threading.main_thread():
            _in_call[-1].append(self)

    subprocess.Popen._execute_child = execute_child  # type: ignore[attr-defined]
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_parent=lambda: _record("fork()"))


def take_spawned() -> list[str]:
    """The processes started since the last call (and forget them)."""
    found = _spawned[:]
    _spawned.clear()
    return found


def completed(args: tuple[str, ...], env: Mapping[str, str], cwd: Path | None = None):
    """`call`, answered as `subprocess.run(..., capture_output=True, text=True)` answers,
    for helpers written against a CompletedProcess."""
    rc, out, err = call(args, env, cwd)
    return subprocess.CompletedProcess(["anylaunch", *args], rc, out, err)
