"""The in-job runtime: what anylaunch runs inside a job, shipped with it as one zipapp.

The modules beside this one import only Python's standard library (3.8 or newer), so a
job's image needs `python3` and nothing else: no anylaunch, no boto3, no pip. Each does
one job: `s3` (the signed S3 client), `cache` (the validated shared-filesystem cache),
`download` and `upload` (transfers through them), `progress` (the log lines), `stage`
(stage-in and stage-out from the manifest), `checkpoint` (the checkpoint to resume
from, the recipe that names it), `triage` (a failed attempt read with `rules_table`, the
diagnosis's rules generated as data: does the job continue itself?) and `main` (the
command line).

They travel as one file, `anylaunch_job.pyz`, and run as
`python3 -I -S anylaunch_job.pyz STEP ARGS` (`-I -S`: the user's PYTHONPATH,
site-packages and sitecustomize play no part). The local backend puts the file in the
job's directory; Slurm, SkyPilot and Lepton write it from the node script, where it
travels compressed as base64 in a quoted heredoc and is checked against its SHA-256
before it is written. Nothing is downloaded when the job starts.

The zip stores its entries uncompressed, with one time and mode: the same code is the
same bytes on any machine (no compressor's version in them), and the whole file is
compressed once for the journey, which keeps it smaller than entries compressed one by
one.

This module is the submit side: it packs its siblings into the zipapp (it is not in it)
and builds the bash words that write and call it. The submit side imports the siblings
themselves (`anylaunch.node.runtime.s3`, ...): one S3 client, one cache, one
checkpoint rule.
"""

from __future__ import annotations

import shlex
import sys
from functools import cache

FILE_NAME = "anylaunch_job.pyz"
# -I -S: the user's PYTHONPATH, site-packages and sitecustomize play no part.
FLAGS = ("-I", "-S")
# The package's name inside the zipapp: its modules import one another relatively.
PACKAGE = "anylaunch_runtime"
# Every entry carries the same time and mode, so the same code is the same bytes: a dry
# run shows exactly what is sent.
_STAMP = (1980, 1, 1, 0, 0, 0)
_MODE = 0o100644 << 16

# The zipapp's entry, in syntax any python3 reads: the version check comes before any
# module that needs 3.8.
_ENTRY = """\
import sys

if sys.version_info < (3, 8):
    sys.stderr.write(
        "anylaunch: python3 in this image is %d.%d; anylaunch's in-job steps need 3.8 or newer\\n"
        % sys.version_info[:2]
    )
    sys.exit(127)

from anylaunch_runtime.main import main

sys.exit(main(sys.argv[1:]))
"""


@cache
def zipapp() -> bytes:
    """The file that ships with the job: the entry, then the in-job modules by name."""
    import io  # here, as in the functions below: job files import this package (the key
    import zipfile  # rule in `cache`), and few of them build the zipapp
    from importlib import resources

    folder = resources.files(__package__)
    names = sorted(
        entry.name
        for entry in folder.iterdir()
        if entry.name.endswith(".py") and entry.name != "__init__.py"
    )
    entries = [("__main__.py", _ENTRY.encode()), (f"{PACKAGE}/__init__.py", b"")]
    entries += [(f"{PACKAGE}/{name}", folder.joinpath(name).read_bytes()) for name in names]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in entries:
            info = zipfile.ZipInfo(name, _STAMP)
            info.create_system = 3  # unix, wherever it is built
            info.external_attr = _MODE
            archive.writestr(info, data, zipfile.ZIP_STORED)
    return buffer.getvalue()


@cache
def digest() -> str:
    """SHA-256 of the zipapp: the node checks what it wrote against it."""
    import hashlib

    return hashlib.sha256(zipapp()).hexdigest()


@cache
def packed() -> str:
    """The zipapp as it travels in a plan: compressed, as base64 text in lines of 76."""
    import base64
    import zlib

    return base64.encodebytes(zlib.compress(zipapp(), 9)).decode("ascii")


def unpacked(text: str) -> bytes:
    """The bytes of a zipapp from its `packed` text."""
    import base64
    import zlib

    return zlib.decompress(base64.b64decode(text))


def argv(runtime_path: str, *args: str, python: str = "python3") -> list[str]:
    """The exec form of one step (for a backend that starts processes itself)."""
    return [python, *FLAGS, runtime_path, *args]


def local_argv(runtime_path: str, *args: str) -> list[str]:
    """One step on this machine: the interpreter running anylaunch, with its stdlib only."""
    return argv(runtime_path, *args, python=sys.executable)


def shell(runtime_word: str, *words: str, python: str = "python3") -> str:
    """One step as a bash line; `runtime_word` and `words` are bash words already
    (quoted by the caller, so they may refer to the node's variables)."""
    return " ".join([shlex.quote(python), *FLAGS, runtime_word, *words])


@cache
def live_source() -> str:
    """The text of `live.py`, which runs as `python3 -I -S -c TEXT` on a node that has no
    zipapp (exec, stack and forward reach nodes of jobs that never wrote one)."""
    from importlib import resources

    return resources.files(__package__).joinpath("live.py").read_text(encoding="utf-8")


def py_spy() -> str | None:
    """This environment's py-spy (the `live` extra): beside the interpreter, else on PATH.
    A node that sees this path (this machine, a shared filesystem) uses it."""
    import os
    import shutil

    here = os.path.join(os.path.dirname(sys.executable), "py-spy")
    if os.path.isfile(here) and os.access(here, os.X_OK):
        return here
    return shutil.which("py-spy")


def live_argv(*args: str, python: str = "python3") -> list[str]:
    """The exec form of one of `live.py`'s commands, its code carried on the command line."""
    return [python, *FLAGS, "-c", live_source(), *args]


def require_python(image: str | None, step: str, python: str = "python3") -> str:
    """Bash that ends the job with one line when the image has no python3 (exit 127).

    Run before the first step, so a missing interpreter names the image and the step
    instead of surfacing as `python3: command not found` somewhere in a log.
    """
    where = f"image {image}" if image else "this node"
    message = f"anylaunch: {where} has no {python}; the {step} step needs {python} >= 3.8 (standard library only)"
    return (
        f"command -v {shlex.quote(python)} >/dev/null 2>&1 || "
        f"{{ printf '%s\\n' {shlex.quote(message)} >&2; exit 127; }}"
    )


# Writes the zipapp from its packed text on stdin to argv[1] if its SHA-256 is argv[2];
# whole or not at all (a temporary name, renamed), in syntax any python3 reads.
_WRITE = """\
import base64, hashlib, os, sys, zlib
path, expected = sys.argv[1:]
try:
    data = zlib.decompress(base64.b64decode(sys.stdin.read()))
except (ValueError, zlib.error):
    data = b""
if hashlib.sha256(data).hexdigest() != expected:
    sys.exit("anylaunch: the in-job runtime arrived damaged (its SHA-256 differs); submit the job again")
part = "%s.%d.part" % (path, os.getpid())
try:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(part, "wb") as handle:
        handle.write(data)
    os.replace(part, path)
except OSError as exc:
    sys.exit("anylaunch: cannot write the in-job runtime to %s: %s" % (path, exc))
"""


def write_shell(
    runtime_word: str, image: str | None, step: str, python: str = "python3", *, needed: bool = True
) -> str:
    """Bash that writes the zipapp from the script itself, for a backend whose way into
    the node is a script or a command line. `runtime_word` is a bash word for its path;
    `step` and `image` name the first step that needs python3, for the error without it.
    Not `needed` (only a step that may be left to the submitting side, the announcement
    of the job's end): without python3 nothing is written and the job goes on."""
    marker = "ANYLAUNCH_RUNTIME"
    write = " ".join([shlex.quote(python), *FLAGS, "-c", shlex.quote(_WRITE)])
    if not needed:
        return "\n".join(
            [
                f"if command -v {shlex.quote(python)} >/dev/null 2>&1; then",
                f"{write} {runtime_word} {digest()} <<'{marker}' || true",
                packed().rstrip("\n"),
                marker,
                "fi",
            ]
        )
    return "\n".join(
        [
            require_python(image, step, python),
            f"{write} {runtime_word} {digest()} <<'{marker}' || exit $?",
            packed().rstrip("\n"),
            marker,
        ]
    )
