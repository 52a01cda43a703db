"""The in-job runtime: what anylaunch runs inside a job, as one file that ships with it.

`anylaunch_job.py` imports only Python's standard library (3.8 or newer), so a job's
image needs `python3` and nothing else: no anylaunch, no boto3, no pip. A backend puts
the file's text among the job's files (a shared job directory, or a heredoc in the
container's command) and calls it through the bash words built here. Nothing is
downloaded when the job starts.

The submit side imports the same module (`anylaunch.runtime.anylaunch_job`): one S3
client, one cache, one checkpoint rule.
"""

from __future__ import annotations

import base64
import shlex
import sys
import zlib
from functools import cache
from importlib import resources

FILE_NAME = "anylaunch_job.py"
# -I -S: the user's PYTHONPATH, site-packages and sitecustomize play no part.
FLAGS = ("-I", "-S")


@cache
def source() -> str:
    """The text of the file that ships with the job."""
    return resources.files(__package__).joinpath(FILE_NAME).read_text(encoding="utf-8")


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


_DECODE = (
    "import base64,sys,zlib;"
    "sys.stdout.buffer.write(zlib.decompress(base64.b64decode(sys.stdin.read())))"
)


@cache
def _packed() -> str:
    return base64.encodebytes(zlib.compress(source().encode("utf-8"), 9)).decode("ascii")


def write_shell(runtime_word: str, image: str | None, step: str) -> str:
    """Bash that writes the runtime file from the command itself (compressed, ~18 KB):
    for a backend whose only way into the container is its command line.
    `runtime_word` is a bash word for the file's path."""
    marker = "ANYLAUNCH_RUNTIME"
    return "\n".join(
        [
            require_python(image, step),
            f'mkdir -p "$(dirname {runtime_word})"',
            f"python3 {' '.join(FLAGS)} -c {shlex.quote(_DECODE)} > {runtime_word}"
            f" <<'{marker}' || exit $?",
            _packed().rstrip("\n"),
            marker,
        ]
    )
