"""A node's log read as whole lines from any offset, and masked a line at a time.

Every reader of logs (`logs`, `logs -f`, `run` attached, the dashboard's live stream, the
Python API, diagnosis) reads through here. Masking replaces whole secret values, so it
only holds on text that holds whole values: a read that began inside a line (an offset a
client sent, a cut at a tail) could begin inside a token, and its rest would pass. Hence
every read begins at a line start: an offset inside a line moves on to the next line,
and only complete lines are returned (the unfinished last one only once the job ended).
Offsets count bytes for files and for text fetched from a backend alike.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field

from anylaunch.backends.base import LogSource
from anylaunch.jobfile.secrets import mask
from anylaunch.observe import jobfiles

# `node:offset`, in ASCII digits; 18 digits hold any file size.
_OFFSET = re.compile(r"([0-9]{1,9}):([0-9]{1,18})")


@dataclass
class Chunk:
    lines: list[str]
    end: int  # where the next read begins: just past the last line returned


@dataclass
class Offsets:
    """How far each node's log has been read: a byte offset per node, always at a line
    start. Bytes for a file and for text fetched from a backend alike (text is counted as
    its UTF-8 encoding), so an offset means the same to every reader: `logs -f`, an
    attached `run` and the dashboard's live stream (where it travels as the event id)."""

    done: dict[int, int] = field(default_factory=dict)

    @classmethod
    def parse(cls, token: str | None) -> Offsets:
        """From `token()`'s text (`0:123,1:456`); anything else in it is ignored: it comes
        from a client, so a number too long to be an offset (Python refuses to read one
        of over 4,300 digits) or digits of another script are no offset."""
        done = {}
        for part in (token or "").split(","):
            found = _OFFSET.fullmatch(part)
            if found:
                done[int(found[1])] = int(found[2])
        return cls(done)

    def token(self) -> str:
        return ",".join(f"{n}:{o}" for n, o in sorted(self.done.items()))

    def read(
        self, source: LogSource, root: str, final: bool, *, tail_bytes: int | None = None
    ) -> list[str]:
        """The complete lines this node's log gained (and the unfinished one, if `final`).

        A node read for the first time starts at the beginning, or `tail_bytes` before
        the end. An offset given from outside (a client's Last-Event-ID) is only a hint:
        `read` begins at a line start whatever it says, so a forged one cannot start
        inside a token and get past the masking."""
        start = self.done.get(source.node)
        chunk = read(
            source, root, start, final=final, tail_bytes=tail_bytes if start is None else None
        )
        self.done[source.node] = chunk.end
        return chunk.lines


def read(
    source: LogSource,
    root: str,
    start: int | None = None,
    *,
    final: bool = True,
    tail_bytes: int | None = None,
) -> Chunk:
    """The complete lines of one node's log from `start` (default: the beginning, or the
    last `tail_bytes` of it), aligned to line starts. `root` is the job's folder: a log
    file reached through a link, or outside it, reads as empty."""
    if source.text is not None:
        data, base = source.text.encode(), 0
        size = len(data)
    else:
        size = _size(source.path, root)
    if start is None:
        start = max(0, size - tail_bytes) if tail_bytes is not None else 0
    start = max(0, min(start, size))  # past the end (a shorter file now): nothing new yet
    if source.text is None:
        base = max(0, start - 1)  # one byte before `start`: is it a line start?
        data = _bytes(source.path, root, base)
    pos = start - base
    if pos > 0 and data[pos - 1 : pos] != b"\n":  # inside a line: begin at the next one
        newline = data.find(b"\n", pos)
        pos = newline + 1 if newline >= 0 else len(data)
    end = len(data) if final else data.rfind(b"\n", pos) + 1
    if end <= pos:
        return Chunk([], base + pos)
    return Chunk(data[pos:end].decode("utf-8", errors="replace").splitlines(), base + end)


def size(source: LogSource, root: str) -> int:
    """Bytes of the log so far (0 when absent or refused)."""
    return len(source.text.encode()) if source.text is not None else _size(source.path, root)


def masked(lines: list[str], secrets: Collection[str]) -> list[str]:
    return [mask(line, secrets) for line in lines] if secrets else lines


def _size(path: str | None, root: str) -> int:
    if not path:
        return 0
    try:
        return jobfiles.size_inside(root, path)
    except OSError:  # absent, unreadable, or refused (a link): nothing to show
        return 0


def _bytes(path: str | None, root: str, start: int) -> bytes:
    if not path:
        return b""
    try:
        return jobfiles.read_inside(root, path, start)
    except OSError:
        return b""
