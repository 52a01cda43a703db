"""Diagnosis accuracy on the corpus of real failure messages (tests/diagnose/corpus/).

There is no alternative tool to run beside it, so the row compares with the goal. The
time per message shows that diagnosing a whole log stays cheap.
"""

from __future__ import annotations

import time

from bench.common import ROOT, Row

GROUP = "diagnose"
GOAL = 0.95


def run() -> list[Row]:
    from anylaunch.diagnose import score

    cases = score.load(ROOT / "tests" / "diagnose" / "corpus")
    started = time.perf_counter()
    result = score.score(cases)
    per_ms = (time.perf_counter() - started) * 1000 / max(1, len(cases))
    print(result.line(), flush=True)
    misses = "; ".join(f"{c.id}: {', '.join(w)}" for c, w in result.misses[:3])
    return [
        Row(
            GROUP,
            f"corpus: {len(cases)} real messages, {len({(c.file, c.index) for c in cases})} cases",
            ours=f"{result.accuracy:.1%} ({result.right}/{len(cases)})",
            goal=f"≥ {GOAL:.0%}, every rule exercised",
            met=result.accuracy >= GOAL and not result.unused_rules,
            note=f"{per_ms:.2f} ms per message" + (f"; misses: {misses}" if misses else ""),
            data={
                "right": result.right,
                "total": len(cases),
                "unused_rules": result.unused_rules,
                "ms_per_message": per_ms,
            },
        )
    ]
