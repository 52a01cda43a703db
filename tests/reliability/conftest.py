"""The reliability suite: real parts (local supervisor, devstack Slurm, the Lepton
emulator, moto S3) under faults, crashes, concurrency, hostile input; it ends with the
figures it promises (faults injected by kind, jobs submitted, duplicates, lost,
tracebacks, secret hits, and the probe's method: offsets tried, links tried, supervisor
kills) in pytest's summary.

The suite runs in several worker processes (pytest-xdist): each test's figures travel to
the process that prints the summary in the test's report, and are added up there."""

from __future__ import annotations

from collections import Counter

import pytest
from reliability_helpers import FAULT_KINDS, FIGURE_ORDER, FIGURES

_REPORTED: Counter[str] = Counter()
_REPORTED_KINDS: Counter[str] = Counter()
# Figures that are the most seen at once, not a count: workers' values are not added.
_MAXIMA = frozenset({"processes at once"})


@pytest.fixture(autouse=True)
def _figures_ride_in_the_report(request):
    figures, kinds = Counter(FIGURES), Counter(FAULT_KINDS)
    yield
    grown = {name: FIGURES[name] for name in _MAXIMA if name in FIGURES}
    request.node.user_properties.append(
        ("reliability", (dict(FIGURES - figures) | grown, dict(FAULT_KINDS - kinds)))
    )


def pytest_runtest_logreport(report) -> None:
    if report.when != "teardown":
        return
    for name, value in report.user_properties:
        if name == "reliability":
            figures, kinds = value
            for name in _MAXIMA & figures.keys():
                _REPORTED[name] = max(_REPORTED[name], figures.pop(name))
            _REPORTED.update(figures)
            _REPORTED_KINDS.update(kinds)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if not _REPORTED:
        return
    kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(_REPORTED_KINDS.items()))
    known = [
        f"{name} {_REPORTED[name]}" + (f" ({kinds})" if name == "faults injected" and kinds else "")
        for name in FIGURE_ORDER
        if name in _REPORTED
    ]
    extra = [f"{name} {n}" for name, n in sorted(_REPORTED.items()) if name not in FIGURE_ORDER]
    terminalreporter.write_sep("-", "reliability figures")
    terminalreporter.write_line(", ".join(known + extra))
