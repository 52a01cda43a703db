"""Diagnosis accuracy on the corpus of real failure messages (tests/diagnose/corpus/).

There is no alternative tool to run beside it, so the row compares with the goal. The
time per message shows that diagnosing a whole log stays cheap.
"""

from __future__ import annotations

import time

from bench.common import ROOT, Row, interleaved, median_ms

GROUP = "diagnose"
GOAL = 0.95


def run() -> list[Row]:
    from anylaunch.observe.diagnose import score

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
        ),
        long_log(),
    ]


def long_log(lines: int = 50_000, rounds: int = 3) -> Row:
    """A long run's log: progress lines on every rank, the failure at the end."""
    from anylaunch.observe.diagnose.engine import diagnose_text

    text = "\n".join(f"[rank{i % 8}]: step {i} loss 0.{i % 97} lr 3e-4" for i in range(lines))
    text += "\n[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    codes: list[str] = []
    samples = interleaved({"log": lambda: codes.append(diagnose_text(text).code)}, rounds, 0)
    seconds = median_ms(samples["log"]) / 1000
    code = codes[-1]
    return Row(
        GROUP,
        f"a {lines:,}-line log",
        ours=f"{seconds:.1f} s",
        goal="≤ 5 s",
        met=seconds <= 5 and code == "OOM_GPU",
        note=f"diagnosed {code}; median of {rounds}",
        data={"seconds": seconds, "code": code},
    )
