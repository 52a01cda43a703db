"""The run key: one name for every attempt of a job, for experiment trackers.

A job that is retried, requeued or resubmitted after an eviction runs its program again;
a tracker that names each run afresh starts a new run each time, and the curves of one
training end up in several. `ANYLAUNCH_RUN_KEY` is the same in every attempt of a job
(and of a split: a retried split keeps its run's key), so a program can resume its
tracker's run by it. Weights & Biases reads its run id and resume mode from the
environment, so for it the key is set as `WANDB_RUN_ID` with `WANDB_RESUME=allow`,
unless the job file or the submitting environment sets them already.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

RUN_KEY_ENV = "ANYLAUNCH_RUN_KEY"
# Weights & Biases: `allow` resumes the run of that id when there is one, and starts
# it when there is none (the first attempt).
WANDB = {"WANDB_RUN_ID": None, "WANDB_RESUME": "allow"}


def run_key(job_id: str, run_id: str | None, split_id: int | None) -> str:
    """The key of a job: its id, or for a split its run's id and split number (every job
    of a split is one line of work)."""
    if run_id is None:
        return job_id
    return f"{run_id}-{split_id if split_id is not None else 0}"


def tracker_env(
    key: str, env: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The variables the key sets for a job whose `env` is given: ANYLAUNCH_RUN_KEY, and
    W&B's where neither `env` nor the submitting environment names them."""
    environ = os.environ if environ is None else environ
    out = {RUN_KEY_ENV: env.get(RUN_KEY_ENV, key)}
    for name, value in WANDB.items():
        if name not in env and name not in environ:
            out[name] = value or out[RUN_KEY_ENV]
    return out
