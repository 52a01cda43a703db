"""Ids: made up for new jobs, and looked up by any unique prefix."""

from __future__ import annotations

import random

_ID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # no i, l, o, u: easy to read aloud

# The operating system's randomness, as `secrets.choice` draws it; the secrets module would
# bring hmac and hashlib (OpenSSL) into every command that opens the store.
_RANDOM = random.SystemRandom()


def new_id() -> str:
    return "".join(_RANDOM.choice(_ID_ALPHABET) for _ in range(8))


def prefix_range(prefix: str) -> tuple[str, str]:
    """Bounds of the ids that start with `prefix`, for `id >= ? AND id < ?`.

    SQLite's LIKE is case-insensitive, so it cannot use the id index and reads every row
    (most of a second at 1,000,000 jobs); a range on the index reads only the matches.
    Every id sorts below the prefix followed by the highest code point.
    """
    return prefix, prefix + "\U0010ffff"
