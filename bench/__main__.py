"""`python -m bench`: every benchmark group, one table, bench/results/latest.{md,json}.

Each group measures anylaunch and the alternative side by side in the same run and
states its goal; a group that cannot run (devstack down, a tool not installed) leaves a
row saying why. `--setup` installs the alternatives into bench/.venv-others first.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path

from bench import (
    diagnose,
    launch,
    lepton,
    others,
    plans,
    plot,
    scale,
    slurm,
    slurm_scale,
    staging,
    startup,
    teardown,
    ui,
)
from bench.common import ROOT, Row, failed

RESULTS = Path(__file__).resolve().parent / "results"
GROUPS = (
    "startup", "plan", "slurm", "lepton", "launch", "teardown", "staging", "ui", "diagnose",
    "scale",
)  # fmt: skip
PICTURE = ROOT / "docs" / "bench-scale.svg"


def to_markdown(rows: list[Row]) -> str:
    head = "| group | case | anylaunch | alternative | goal | met | note |\n|---|---|---|---|---|---|---|\n"
    met = {True: "yes", False: "**no**", None: ""}
    lines = [
        f"| {r.group} | {r.case} | {r.ours} | {r.other} | {r.goal} | {met[r.met]} | {r.note} |"
        for r in rows
    ]
    return head + "\n".join(lines) + "\n"


def with_load(rows: list[Row], load: float) -> list[Row]:
    """A row that misses says how loaded the machine was while its group ran: on a shared
    machine an absolute time or a ratio to bare Python may miss for that alone."""
    for row in rows:
        if row.met is False and not row.note.startswith("error:"):
            row.note += f"; load average {load:.1f} when its group ended"
            row.data["load_average"] = load
    return rows


def machine() -> str:
    cpus = os.cpu_count()
    memory = ""
    try:
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f", {kib / 2**20:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    return f"{platform.platform()}, {cpus} CPUs{memory}, Python {platform.python_version()}"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--rounds", type=int, default=10, help="start-up samples per command")
    parser.add_argument("--jobs", type=int, default=100_000, help="jobs in the store for `ps`")
    parser.add_argument("--only", choices=GROUPS, action="append", help="run only these groups")
    parser.add_argument("--setup", action="store_true", help="install the alternatives first")
    args = parser.parse_args()
    if args.setup:
        others.setup()
    groups: dict[str, Callable[[], list[Row]]] = {
        "startup": lambda: startup.run(rounds=args.rounds, jobs=args.jobs),
        "plan": plans.run,
        "slurm": slurm.run,
        "lepton": lepton.run,
        "launch": launch.run,
        "teardown": teardown.run,
        "staging": staging.run,
        "ui": ui.run,
        "diagnose": diagnose.run,
        "scale": lambda: scale.run() + slurm_scale.run(),
    }
    # An installed package has its bytecode compiled by pip; an editable checkout's src/
    # does not, and with PYTHONDONTWRITEBYTECODE set every command would compile anylaunch
    # again. Compiled once here, start-up rows measure what users run.
    compileall.compile_dir(ROOT / "src", quiet=1)
    started = time.perf_counter()
    rows: list[Row] = []
    for name, group in groups.items():
        if args.only and name not in args.only:
            continue
        began = time.perf_counter()
        try:
            found = group()
        except Exception as exc:  # one broken group must not hide the others
            found = [failed(name, "(group)", "", exc)]
        took = time.perf_counter() - began
        rows += with_load(found, os.getloadavg()[0])
        print(f"bench: {name} done in {took:.0f} s", flush=True)
    elapsed = time.perf_counter() - started
    table = to_markdown(rows)
    print(table)
    meta = {
        "when": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": machine(),
        "load_average": os.getloadavg(),
        "elapsed_s": round(elapsed, 1),
    }
    RESULTS.mkdir(exist_ok=True)
    load = ", ".join(f"{x:.1f}" for x in meta["load_average"])
    header = (
        f"# anylaunch bench — {meta['when']}\n\n"
        f"Machine: {meta['machine']}; load average at the end {load}; whole run {elapsed:.0f} s.\n\n"
    )
    (RESULTS / "latest.md").write_text(header + table)
    if plot.series(rows):  # the growth curves, as a picture for docs/bench.md
        load_note = f"load {meta['load_average'][0]:.1f}" if meta["load_average"] else ""
        # Only a whole run redraws the committed picture; a run of some groups draws
        # beside its own results.
        picture = RESULTS / PICTURE.name if args.only else PICTURE
        picture.write_text(plot.svg(rows, f"anylaunch bench, {meta['when']}, {load_note}"))
    (RESULTS / "latest.json").write_text(
        json.dumps({"meta": meta, "rows": [r.as_dict() for r in rows]}, indent=2)
    )


if __name__ == "__main__":
    main()
