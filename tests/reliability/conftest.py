"""The reliability suite: real parts (local supervisor, devstack Slurm, the Lepton
emulator, moto S3) under faults, crashes, concurrency, hostile input; it ends with the
figures it promises (faults injected, jobs submitted, duplicates, lost, tracebacks,
secret hits) in pytest's summary."""

from __future__ import annotations

from reliability_helpers import FIGURE_ORDER, FIGURES


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if not FIGURES:
        return
    known = [f"{name} {FIGURES[name]}" for name in FIGURE_ORDER if name in FIGURES]
    extra = [f"{name} {n}" for name, n in sorted(FIGURES.items()) if name not in FIGURE_ORDER]
    terminalreporter.write_sep("-", "reliability figures")
    terminalreporter.write_line(", ".join(known + extra))
