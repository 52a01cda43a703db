"""What a backend's own job-file section may say about the job's size.

A section model (`slurm:`, `lepton:` ...) is a pydantic model in its backend's folder,
named by `Backend.section`. One that spells the job's size in the platform's own words
(`num_nodes`, `ntasks_per_node`, `accelerators`) mixes in `Sized`, so that the launcher
compares those with the neutral `nodes`, `gpus_per_node` and `ranks_per_node`, and checks
the size limits on them.

The neutral words: `gpus_per_node: N` asks every backend for N GPUs per node and starts
one rank per GPU; `ranks_per_node: N` starts N ranks that run without GPUs. `per_node` is
the one place that turns the neutral words and a section's into ranks and GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


class Sized:
    """A section that writes the job's size in its own words: (nodes, ranks per node) in
    `size_keys`, and the GPUs per node under `gpu_key`."""

    size_keys: ClassVar[tuple[str, str]] = ("nodes", "ranks_per_node")
    gpu_key: ClassVar[str | None] = None

    def size(self, key: str) -> int | None:
        """The size written under `key` (one of `size_keys`) as a number, None if unset."""
        value = vars(self).get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def gpus(self) -> int | None:
        """The GPUs per node the section writes as a number; None where it gives none."""
        return self.size(self.gpu_key) if self.gpu_key else None

    def asks_for_gpus(self) -> bool:
        """Whether the section asks the platform for GPUs at all (a GPU type alone does)."""
        return bool(self.gpus())

    def gpus_key(self) -> str:
        """The key the section's GPUs are written under, for errors to point at."""
        return self.gpu_key or ""


@dataclass(frozen=True)
class PerNode:
    """What each node of a job runs: its ranks, and the GPUs it asks for (0: none)."""

    ranks: int
    gpus: int


def per_node(gpus_per_node: int | None, ranks_per_node: int | None, section: object) -> PerNode:
    """Ranks and GPUs per node from the neutral keys and a backend's section.

    One rank per GPU unless a count of ranks is written: `ranks_per_node`, or the
    section's own (`slurm.ntasks_per_node`). The loader has already refused two places
    that disagree, so the order only breaks ties for a spec built in Python.
    """
    sized = section if isinstance(section, Sized) else None
    section_ranks = sized.size(sized.size_keys[1]) if sized else None
    section_gpus = sized.gpus() if sized else None
    gpus = gpus_per_node or section_gpus or 0
    ranks = ranks_per_node or gpus_per_node or section_ranks or section_gpus or 1
    return PerNode(ranks=ranks, gpus=gpus)
