"""Profiling reports a job wrote (Nsight Systems `.nsys-rep`), for `anylaunch status`.

A backend that profiles puts a glob of where the reports land into its plan payload
(`nsys_reports`, with `{job_dir}` and `{job_id}` standing for the job's); this module
only expands it, so the CLI needs no knowledge of any backend.
"""

from __future__ import annotations

import glob

from anylaunch.store import JobRecord


def profile_reports(record: JobRecord) -> list[str]:
    """Paths of the reports that exist now, sorted; empty when the job does not profile."""
    pattern = (record.plan or {}).get("payload", {}).get("nsys_reports")
    if not pattern:
        return []
    pattern = pattern.replace("{job_dir}", record.job_dir).replace("{job_id}", record.id)
    return sorted(glob.glob(pattern))
