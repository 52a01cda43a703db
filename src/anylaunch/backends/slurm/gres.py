"""Slurm's generic resources (GRES) as its tools write them: pure, no cluster.

A node's GRES as `sinfo -o %G` (and `scontrol show node`'s `Gres=`) prints them: `gpu:4`,
`gpu:a100:4(S:0-1)`, several joined by commas (`gpu:tesla:2,gpu:kepler:2,mps:400`), and
`(null)` for none. A request (`--gres`) is written the same way: `gpu:8`, `gpu:h100:8`,
or a bare `gpu` for one. `capacity` reads what a partition's nodes can give a job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# `name[:type][:no_consume][:count]`; a count may carry a unit (`bandwidth:lustre:4G`).
_COUNT = re.compile(r"^(\d+)([KMGTP]?)$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
# Node states (`sinfo %t`, less the flag after them) in which a node takes no new job.
_UNUSABLE = {"down", "drain", "drng", "fail", "failg", "inval", "futr", "unk"}
# The flags sinfo appends to a state: `*` means the node does not respond.
_STATE_FLAGS = "*~#!%$@^-+"
GPU = "gpu"


@dataclass(frozen=True)
class Gres:
    """One entry: `gpu:a100:4` is Gres("gpu", "a100", 4)."""

    name: str
    type: str | None
    count: int


def parse(text: str) -> list[Gres]:
    """The entries of a GRES string; `(null)` and empty text have none."""
    out = []
    for item in _items(text):
        item = re.sub(r"\(.*\)$", "", item).strip()  # socket or index ranges: (S:0-1)
        if not item or item.lower() in ("(null)", "n/a", "none"):
            continue
        name, *rest = item.split(":")
        rest = [p for p in rest if p != "no_consume"]
        count = 1
        if rest:
            match = _COUNT.match(rest[-1])
            if match:
                count = int(match.group(1)) * _UNITS[match.group(2).upper()]
                rest.pop()
        out.append(Gres(name, rest[0] if rest else None, count))
    return out


def _items(text: str) -> list[str]:
    """Split at the commas between entries, not those inside `(S:4-5,10-11)`."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(depth - 1, 0)
        elif char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return items


def gpus(entries: list[Gres], gpu_type: str | None = None) -> int:
    """How many GPUs the entries hold (of `gpu_type`, when one is named)."""
    return sum(
        e.count for e in entries if e.name == GPU and (gpu_type is None or e.type == gpu_type)
    )


def requested(text: str | None) -> tuple[int, str | None] | None:
    """The GPUs a `--gres` request asks for per node, and their type; None: no GPU in it."""
    wanted = [e for e in parse(text or "") if e.name == GPU]
    if not wanted:
        return None
    return sum(e.count for e in wanted), wanted[0].type


# -- a partition's nodes -------------------------------------------------------------------

SINFO_FORMAT = "%P|%D|%t|%G"


@dataclass(frozen=True)
class NodeGroup:
    """Nodes of one partition that sinfo prints on one line: same state, same GRES."""

    partition: str
    default: bool  # the cluster's default partition (sinfo marks it with `*`)
    count: int
    state: str
    gres: list[Gres]

    @property
    def usable(self) -> bool:
        """Whether these nodes take new jobs now (not down, drained or unresponsive)."""
        return not self.state.endswith("*") and self.state.rstrip(_STATE_FLAGS) not in _UNUSABLE


def node_groups(text: str) -> list[NodeGroup]:
    """`sinfo --noheader -o '%P|%D|%t|%G'` output; lines it cannot read are skipped."""
    out = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 4 or not parts[1].strip().isdigit():
            continue
        partition, count, state, gres = (p.strip() for p in parts)
        out.append(
            NodeGroup(
                partition=partition.rstrip("*"),
                default=partition.endswith("*"),
                count=int(count),
                state=state,
                gres=parse(gres),
            )
        )
    return out


@dataclass(frozen=True)
class Capacity:
    """How many of a partition's nodes could hold a job's GPUs, ever and now."""

    partition: str | None  # None: the cluster has no such partition (or no default)
    fit: int  # nodes with at least that many GPUs (of the type)
    fit_usable: int  # of those, nodes that take new jobs now
    largest: int  # the most GPUs (of the type) any node of the partition has
    total: int  # the partition's nodes


def capacity(
    groups: list[NodeGroup], partition: str | None, want: int, gpu_type: str | None = None
) -> Capacity:
    """What `partition` (None: the default one) offers a job asking `want` GPUs per node."""
    mine = [g for g in groups if (g.partition == partition if partition else g.default)]
    name = partition or (mine[0].partition if mine else None)
    if not mine:
        return Capacity(None, 0, 0, 0, 0)
    fit = [g for g in mine if gpus(g.gres, gpu_type) >= want]
    return Capacity(
        partition=name,
        fit=sum(g.count for g in fit),
        fit_usable=sum(g.count for g in fit if g.usable),
        largest=max(gpus(g.gres, gpu_type) for g in mine),
        total=sum(g.count for g in mine),
    )
