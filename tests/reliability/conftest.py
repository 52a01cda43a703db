"""The reliability suite: real parts (local supervisor, devstack Slurm, the Lepton
emulator, moto S3) under faults, crashes, concurrency, hostile input; it ends with the
figures it promises (faults injected by kind, jobs submitted, duplicates, lost,
tracebacks, secret hits, and the probe's method: offsets tried, links tried, supervisor
kills) in pytest's summary."""

from __future__ import annotations

from reliability_helpers import FAULT_KINDS, FIGURE_ORDER, FIGURES


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if not FIGURES:
        return
    kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(FAULT_KINDS.items()))
    known = [
        f"{name} {FIGURES[name]}" + (f" ({kinds})" if name == "faults injected" and kinds else "")
        for name in FIGURE_ORDER
        if name in FIGURES
    ]
    extra = [f"{name} {n}" for name, n in sorted(FIGURES.items()) if name not in FIGURE_ORDER]
    terminalreporter.write_sep("-", "reliability figures")
    terminalreporter.write_line(", ".join(known + extra))
