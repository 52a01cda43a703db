"""`python -m bench`: run the benchmarks, print a table, write bench/results/latest.{md,json}."""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

from bench import staging, startup

RESULTS = Path(__file__).resolve().parent / "results"


def to_markdown(rows: list[dict]) -> str:
    head = (
        "| benchmark | case | ms | × python | goal | met | note |\n|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in rows:
        met = {True: "yes", False: "**no**", None: ""}[r["met"]]
        ms = "" if r["median_ms"] is None else f"{r['median_ms']:.1f}"
        ratio = "" if r["ratio_to_python"] is None else f"{r['ratio_to_python']:.1f}"
        lines.append(
            f"| {r['benchmark']} | {r['case']} | {ms} | {ratio} | {r['goal']} | {met} | {r.get('note', '')} |"
        )
    return head + "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--rounds", type=int, default=15, help="samples per command")
    parser.add_argument("--jobs", type=int, default=100_000, help="jobs in the store for `ps`")
    args = parser.parse_args()
    rows = startup.run(rounds=args.rounds, jobs=args.jobs)
    rows += staging.run()
    table = to_markdown(rows)
    print(table)
    RESULTS.mkdir(exist_ok=True)
    meta = {
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": platform.platform(),
        "python": platform.python_version(),
    }
    (RESULTS / "latest.md").write_text(f"# anylaunch bench — {meta['when']}\n\n{table}")
    (RESULTS / "latest.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
