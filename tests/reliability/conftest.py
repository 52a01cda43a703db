"""The reliability suite: real parts (local supervisor, devstack Slurm, the Lepton
emulator, moto S3) under faults, crashes, concurrency, hostile input; it ends with the
figures it promises (faults injected by kind, jobs submitted, duplicates, lost,
tracebacks, secret hits, and the probe's method: offsets tried, links tried, supervisor
kills) in pytest's summary.

The suite runs in several worker processes (pytest-xdist), and the process that prints
the summary loads only the top conftest: each test's figures travel in its report, and
tests/conftest.py adds them up and prints them."""

from __future__ import annotations

from collections import Counter

import pytest
from reliability_helpers import FAULT_KINDS, FIGURE_ORDER, FIGURES

# Figures that are the most seen at once, not a count: workers' values are not added.
MAXIMA = ("processes at once",)


@pytest.fixture(autouse=True)
def _figures_ride_in_the_report(request):
    figures, kinds = Counter(FIGURES), Counter(FAULT_KINDS)
    yield
    grown = {name: FIGURES[name] for name in MAXIMA if name in FIGURES}
    request.node.user_properties.append(
        (
            "reliability",
            {
                # a figure first counted here is reported even at 0 ("failures recorded wrong 0")
                "figures": {
                    k: n - figures[k]
                    for k, n in FIGURES.items()
                    if k not in figures or n != figures[k]
                }
                | grown,
                "kinds": dict(FAULT_KINDS - kinds),
                "order": FIGURE_ORDER,
                "maxima": MAXIMA,
            },
        )
    )
