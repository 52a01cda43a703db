"""What a backend's own job-file section may say about the job's size.

A section model (`slurm:`, `lepton:` ...) is a pydantic model in its backend's folder,
named by `Backend.section`. One that spells the job's size in the platform's own words
(`num_nodes`, `ntasks_per_node`) mixes in `Sized`, so that the launcher compares those
with the neutral `nodes` and `gpus_per_node` and checks the size limits on them.
"""

from __future__ import annotations

from typing import ClassVar


class Sized:
    """A section that writes the job's size: (nodes, ranks per node) in its own words."""

    size_keys: ClassVar[tuple[str, str]] = ("nodes", "gpus_per_node")

    def size(self, key: str) -> int | None:
        """The size written under `key` (one of `size_keys`) as a number, None if unset."""
        value = vars(self).get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None
