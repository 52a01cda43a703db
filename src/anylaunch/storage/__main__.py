"""`python -m anylaunch.storage in|out MANIFEST`: the staging steps that run inside a job.

Prints one summary line (also written to STATE_DIR/stage-in.json or stage-out.json);
exit status 1 with a one-line reason when an input or output cannot be staged.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("in", "out"):
        print("usage: python -m anylaunch.storage in|out MANIFEST", file=sys.stderr)
        return 2
    from anylaunch.storage import s3, stagein, stageout
    from anylaunch.storage.manifest import Manifest

    direction, path = argv
    manifest = Manifest.model_validate_json(Path(path).read_text())
    started = time.monotonic()
    try:
        summary = stagein.run(manifest) if direction == "in" else stageout.run(manifest)
    except (stagein.StageError, OSError, ValueError) as exc:
        print(f"anylaunch-stage: {direction}: error: {exc}", file=sys.stderr, flush=True)
        return 1
    except Exception as exc:  # botocore's errors: one line, never a traceback in job logs
        print(
            f"anylaunch-stage: {direction}: error: {s3.error_code(exc)}: {exc}",
            file=sys.stderr,
            flush=True,
        )
        return 1
    result = {**dataclasses.asdict(summary), "seconds": round(time.monotonic() - started, 3)}
    result.pop("refreshed", None)
    state = Path(manifest.state_dir)
    state.mkdir(parents=True, exist_ok=True)
    (state / f"stage-{direction}.json").write_text(
        json.dumps({**dataclasses.asdict(summary), **result})
    )
    print(
        f"anylaunch-stage: {direction}: " + ", ".join(f"{k}={v}" for k, v in result.items()),
        file=sys.stderr,
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
