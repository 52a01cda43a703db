"""The command line of the in-job runtime:

    python3 -I -S anylaunch_job.pyz stage in|out MANIFEST   # S3 staging through the cache
    python3 -I -S anylaunch_job.pyz newest DIR               # the checkpoint to resume from
    python3 -I -S anylaunch_job.pyz fill-recipe FILE DEFAULT # restore_from.path in a recipe
    python3 -I -S anylaunch_job.pyz enter|stack|watch|pipe|signal ... # a live job (see live.py)
    python3 -I -S anylaunch_job.pyz notify ...               # the job's end announced (notify.py)
    python3 -I -S anylaunch_job.pyz marks|triage ...         # a failed attempt (triage.py)

Staging's modules are imported only when a staging step runs: `newest` and
`fill-recipe` run before the program on every attempt.
"""

from __future__ import annotations

import os
import sys

from .checkpoint import fill_recipe, newest_checkpoint

USAGE = (
    "usage: anylaunch_job.pyz stage in|out MANIFEST | newest DIR | fill-recipe FILE DEFAULT"
    " | enter|stack|watch|pipe|signal ... | notify ... | marks|triage ..."
)


def stage(direction: str, manifest_path: str) -> int:
    """One staging step; its summary goes to the log and to `<state_dir>/stage-<in|out>.json`."""
    import json
    import time

    from .cache import StageError, atomic_write
    from .s3 import S3Error
    from .stage import stage_in, stage_out

    with open(manifest_path) as handle:
        manifest = json.load(handle)
    started = time.monotonic()
    try:
        summary = stage_in(manifest) if direction == "in" else stage_out(manifest)
    except (StageError, S3Error, OSError, ValueError) as exc:
        sys.stderr.write(f"anylaunch-stage: {direction}: error: {exc}\n")
        return 1
    result = summary.as_dict()
    result.pop("refreshed", None)
    result["seconds"] = round(time.monotonic() - started, 3)
    os.makedirs(manifest["state_dir"], exist_ok=True)
    atomic_write(
        os.path.join(manifest["state_dir"], f"stage-{direction}.json"),
        json.dumps({**summary.as_dict(), **result}),
    )
    sys.stderr.write(
        f"anylaunch-stage: {direction}: " + ", ".join(f"{k}={v}" for k, v in result.items()) + "\n"
    )
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["stage"] and len(argv) == 3 and argv[1] in ("in", "out"):
        return stage(argv[1], argv[2])
    if argv[:1] == ["newest"] and len(argv) == 2:
        found = newest_checkpoint(argv[1])
        if found:
            print(found)
        return 0
    if argv[:1] == ["fill-recipe"] and len(argv) == 3:
        fill_recipe(argv[1], argv[2])
        return 0
    if argv[:1] in (["enter"], ["stack"], ["watch"], ["pipe"], ["signal"]):
        from .live import main as live

        return live(argv)
    if argv[:1] in (["marks"], ["triage"]):
        from .triage import main as triage

        return triage(argv)
    if argv[:1] == ["notify"]:
        from .notify import in_job

        return in_job(argv[1:])
    sys.stderr.write(USAGE + "\n")
    return 2
