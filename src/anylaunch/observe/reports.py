"""Profiling reports a job wrote (Nsight Systems `.nsys-rep`), for `anylaunch status`.

A backend that profiles puts a glob of where the reports land into its plan payload
(`nsys_reports`, with `{job_dir}` and `{job_id}` standing for the job's); this module
only expands it, so the CLI needs no knowledge of any backend.

The job writes that folder, so what is in it is the job's word: a report that is a
symbolic link (or reached through one) is neither listed nor opened (`leftovers`).
"""

from __future__ import annotations

import glob
import os
import re

from anylaunch.observe import jobfiles
from anylaunch.store import JobRecord


def profile_reports(record: JobRecord) -> list[str]:
    """Paths of the reports that exist now as plain files, sorted; empty when the job
    does not profile."""
    pattern = _pattern(record)
    if not pattern:
        return []
    return [p for p in sorted(glob.glob(pattern)) if _plain(_root(record, pattern), p)]


def open_report(record: JobRecord, path: str) -> int:
    """A file descriptor of one listed report, opened without following any link."""
    return jobfiles.open_inside(_root(record, _pattern(record)), path)


def _pattern(record: JobRecord) -> str:
    pattern = (record.plan or {}).get("payload", {}).get("nsys_reports") or ""
    return pattern.replace("{job_dir}", record.job_dir).replace("{job_id}", record.id)


def _root(record: JobRecord, pattern: str) -> str:
    """The folder every report must stay inside: the job's, or the profile folder the
    job file named (the pattern's part before its first wildcard)."""
    fixed = os.path.dirname(re.split(r"[*?\[]", pattern, maxsplit=1)[0])
    job_dir = os.path.normpath(record.job_dir)
    if os.path.normpath(fixed).startswith(job_dir + os.sep) or os.path.normpath(fixed) == job_dir:
        return job_dir
    return fixed


def _plain(root: str, path: str) -> bool:
    try:
        os.close(jobfiles.open_inside(root, path))
    except OSError:
        return False
    return True
