"""What a job's retry policy (`retry:` in the job file) does with a diagnosis: whether the
next attempt is made, after how long, and which nodes it keeps away from.

`on:` names diagnosis classes, or the groups `infra` (the platform's failures: every
class whose fix is the platform's, capacity included) and `any` (every class but a
cancel). Without `on:` the policy retries what diagnosis marks retryable. A program
error (USER_ERROR, OOM_GPU, ...) is retried only when `on:` names it, or `any`.

Standard library only, and plain data in and out: the same rule decides on this host (a
controller making a local, Lepton or SkyPilot job's next attempt) and inside a Slurm job
deciding its own, where it travels in the in-job runtime.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from anylaunch.observe.diagnose.classes import BY_CODE, CAPACITY, CLASSES, INFRA

GROUPS = {
    "infra": frozenset(c.code for c in CLASSES if c.err_class in (INFRA, CAPACITY)),
    "any": frozenset(c.code for c in CLASSES if c.code != "CANCELLED"),
}
DEFAULT = frozenset(c.code for c in CLASSES if c.retryable)
# A cancel is someone's decision, never a failure to try again, whatever `on:` says.
NEVER = frozenset({"CANCELLED"})
# Failures that diagnosis pins on the node that printed them: the next attempt avoids
# it. A GPU or host fault is the node's; a collective's error usually shows on every
# rank and is the node's only when its own network device failed (NCCL's InfiniBand
# transport names it).
NODE_CLASSES = frozenset({"HARDWARE_GPU", "NODE_FAIL"})
MAX_BACKOFF_S = 3600.0


@dataclass(frozen=True)
class Decision:
    """The policy's answer at the end of one attempt."""

    retry: bool
    why: str  # why the next attempt is made, or why none is
    delay_s: float = 0.0
    avoid: list[str] = field(default_factory=list)  # every node the next attempt avoids


def names() -> list[str]:
    """Every word `retry.on` accepts: the classes, then the groups."""
    return [c.code for c in CLASSES] + sorted(GROUPS)


def classes(on: Sequence[str] | None) -> frozenset[str]:
    """The classes a policy's `on:` retries (its groups expanded)."""
    if on is None:
        return DEFAULT
    found: set[str] = set()
    for word in on:
        found |= GROUPS.get(word, {word})
    return frozenset(found - NEVER)


def said_of(on: Sequence[str] | None) -> str:
    """How a policy's `on:` reads in the reason given for a decision."""
    return "retry.on: " + (", ".join(on) if on else "the retryable classes")


def backoff(policy: Mapping[str, Any], attempt: int) -> float:
    """Seconds to wait before the attempt after `attempt`: `backoff`, doubled for each
    attempt after the first, never more than `max_backoff`."""
    first = float(policy.get("backoff", 0) or 0)
    most = float(policy.get("max_backoff", MAX_BACKOFF_S) or MAX_BACKOFF_S)
    return min(first * 2 ** max(attempt - 1, 0), most)


def blamed_node(diagnosis: Mapping[str, Any], hosts: Sequence[str]) -> str | None:
    """The host a failure is pinned on, when diagnosis pins it on one: the node whose
    log shows it (`first_failure.node`), named through `hosts` (node index -> host)."""
    # Here, not at the top: a submit reads this policy and must not compile the rules.
    from anylaunch.observe.diagnose.rules import NCCL_IB

    code = diagnosis.get("code")
    evidence = diagnosis.get("evidence") or []
    emitter = str(evidence[0].get("emitter") or "") if evidence else ""
    if code not in NODE_CLASSES and not (code == "NCCL_ERROR" and emitter.startswith(NCCL_IB)):
        return None
    first = diagnosis.get("first_failure") or {}
    node = first.get("node")
    if not isinstance(node, int) or not 0 <= node < len(hosts):
        return None
    return str(hosts[node]) or None


def decide(
    policy: Mapping[str, Any],
    attempt: int,
    diagnosis: Mapping[str, Any],
    *,
    hosts: Sequence[str] = (),
    avoided: Sequence[str] = (),
) -> Decision:
    """Whether attempt `attempt`, which ended as `diagnosis` says (its `to_json`), is
    followed by another. `hosts` are the hosts the attempt ran on (node index -> host),
    `avoided` those earlier attempts were already kept away from."""
    most = int(policy.get("max_attempts", 1) or 1)
    code = str(diagnosis.get("code") or "UNKNOWN")
    on = policy.get("on")
    retried = classes(on)
    said = said_of(on)
    avoid = list(dict.fromkeys(str(h) for h in avoided))
    blamed = blamed_node(diagnosis, hosts)
    if blamed is not None and blamed not in avoid:
        avoid.append(blamed)
    if code not in retried:
        kind = BY_CODE[code].err_class if code in BY_CODE else "unknown"
        return Decision(False, f"{code} ({kind}) is not retried ({said})", avoid=avoid)
    if attempt >= most:
        return Decision(False, f"{code}: no attempt left (retry.max_attempts: {most})", avoid=avoid)
    delay = backoff(policy, attempt)
    why = f"{code} is retried ({said}): attempt {attempt + 1} of {most}"
    if delay:
        why += f" after {delay:g}s"
    if blamed is not None:
        why += f", avoiding {blamed}"
    return Decision(True, why, delay, avoid)


def summary(diagnosis: Mapping[str, Any], blamed: str | None) -> dict[str, Any]:
    """What an attempt keeps of its diagnosis: the class, cause and fix, and the node it
    was pinned on (`node`, a host; None when it was pinned on none)."""
    keys = ("code", "err_class", "retryable", "cause", "suggestion")
    return {**{k: diagnosis.get(k) for k in keys}, "node": blamed}


def next_avoided(avoided: Sequence[str], diagnosis: Mapping[str, Any] | None) -> list[str]:
    """The nodes the attempt after one is kept off: those it was kept off, and the one
    its failure was pinned on."""
    blamed = (diagnosis or {}).get("node")
    return list(dict.fromkeys([*avoided, *([blamed] if blamed else [])]))
