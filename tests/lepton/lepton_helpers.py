"""Helpers shared by the Lepton tests (a plain module: tests/ is not a package)."""

from __future__ import annotations

from pathlib import Path

from helpers import wait_until  # noqa: F401 - re-exported for the Lepton tests

PROGRAMS = Path(__file__).resolve().parent / "programs"
ROOT = Path(__file__).resolve().parents[2]
