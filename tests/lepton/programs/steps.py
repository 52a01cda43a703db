"""A training stand-in: one checkpoint per step in $ANYLAUNCH_CHECKPOINT_DIR, resumes from
the newest one. `python steps.py STEPS SECONDS_PER_STEP`."""

import os
import sys
import time
from pathlib import Path

ckpt = Path(os.environ["ANYLAUNCH_CHECKPOINT_DIR"])
ckpt.mkdir(parents=True, exist_ok=True)
steps, delay = int(sys.argv[1]), float(sys.argv[2])
done = [int(p.stem.split("-")[1]) for p in ckpt.glob("step-*.ckpt")]
start = max(done, default=0)
if start:
    print(f"resumed from step {start} (attempt {os.environ['ANYLAUNCH_ATTEMPT']})", flush=True)
for step in range(start + 1, steps + 1):
    time.sleep(delay)
    tmp = ckpt / f"step-{step}.tmp"
    tmp.write_text(str(step))
    tmp.replace(ckpt / f"step-{step}.ckpt")
    print(f"step {step}", flush=True)
print("done", flush=True)
