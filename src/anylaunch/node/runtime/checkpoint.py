"""The checkpoint to resume from, and the recipe that names it.

`newest` and `fill-recipe` run before the program on every attempt, so this module
imports little: they start about as fast as python3 itself.
"""

from __future__ import annotations

import os
import re

from .cache import atomic_write

PLACEHOLDER = "@@ANYLAUNCH_RESUME_FROM@@"
MARKERS = (".complete", "COMPLETE", ".done", "DONE", ".metadata")
UNFINISHED = (".tmp", ".partial", ".incomplete", ".lock", ".part")


def is_complete(directory: str) -> bool:
    """A writer marked it complete: a marker in it or in one of its subfolders
    (torch.distributed.checkpoint writes `.metadata` last); `.incomplete` vetoes."""
    if os.path.exists(os.path.join(directory, ".incomplete")):
        return False
    try:
        subdirs = [e.path for e in os.scandir(directory) if e.is_dir() and e.name[0] != "."]
    except OSError:
        return False
    return any(
        os.path.exists(os.path.join(folder, marker))
        for folder in [directory, *subdirs]
        for marker in MARKERS
    )


def newest_checkpoint(directory: str) -> str | None:
    """The newest complete checkpoint in `directory`, or None.

    1. a `LATEST`/`latest` pointer (a symlink, a file naming an entry, or a directory);
    2. else the complete entry with the highest step number (the last number in its name).
       A file counts unless its name says it is unfinished (files are written by rename).
    """
    directory = directory.rstrip("/") or "/"
    if not os.path.isdir(directory):
        return None
    for name in ("LATEST", "latest"):
        pointer = os.path.join(directory, name)
        if os.path.islink(pointer):
            target = os.path.realpath(pointer)
            if os.path.exists(target):
                return target
        elif os.path.isdir(pointer):
            return pointer
        elif os.path.isfile(pointer):
            with open(pointer) as handle:
                target = handle.readline().strip()
            if target and not os.path.isabs(target):
                target = os.path.join(directory, target)
            if target and os.path.exists(target):
                return target
    best, best_n = None, -1
    for entry in sorted(os.listdir(directory)):
        if entry.startswith(".") or entry.endswith(UNFINISHED):
            continue
        path = os.path.join(directory, entry)
        if os.path.isdir(path) and not is_complete(path):
            continue
        numbers = re.findall(r"[0-9]+", entry)
        if not numbers:
            continue
        n = int(numbers[-1])
        if n > best_n:
            best, best_n = path, n
    return best


def fill_recipe(path: str, default: str) -> str:
    """Put the checkpoint (ANYLAUNCH_RESUME_FROM, else `default`) into a rendered recipe.

    The file holds `'@@ANYLAUNCH_RESUME_FROM@@'` as a single-quoted YAML scalar, so the
    value is escaped by doubling single quotes.
    """
    value = os.environ.get("ANYLAUNCH_RESUME_FROM") or default
    with open(path) as handle:
        text = handle.read()
    atomic_write(path, text.replace(PLACEHOLDER, value.replace("'", "''")))
    return value
