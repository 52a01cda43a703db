"""Where the store lives: `$ANYLAUNCH_HOME`, made a folder on first use."""

from __future__ import annotations

import os
from pathlib import Path

from anylaunch.errors import StoreError


def home() -> Path:
    """`$ANYLAUNCH_HOME`, default `~/.anylaunch`."""
    return Path(os.environ.get("ANYLAUNCH_HOME") or Path.home() / ".anylaunch").expanduser()


def make_home(root: Path) -> None:
    """ANYLAUNCH_HOME as a folder only its owner can enter (it holds the store, job
    folders and logs), or one line saying why it cannot be."""
    from anylaunch.store import private

    try:
        private.folder(root)
    except (FileExistsError, NotADirectoryError):
        raise StoreError(
            f"ANYLAUNCH_HOME {root} is not a folder (a file is in the way)"
            " — point ANYLAUNCH_HOME at a folder, or move the file away"
        ) from None
    except OSError as exc:
        raise StoreError(
            f"ANYLAUNCH_HOME {root} cannot be created ({exc.strerror})"
            " — point ANYLAUNCH_HOME at a folder you can write"
        ) from None
