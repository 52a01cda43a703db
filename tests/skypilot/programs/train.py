"""A training stand-in for the resume contract: one checkpoint per step, atomically.

`python train.py STEPS SECONDS_PER_STEP [-c RECIPE]`: checkpoints go to
$ANYLAUNCH_CHECKPOINT_DIR as step-N.ckpt; it starts after $ANYLAUNCH_RESUME_FROM and
prints what the recipe's restore_from.path said.
"""

import os
import sys
import time
from pathlib import Path

args = sys.argv[1:]
recipe = args[args.index("-c") + 1] if "-c" in args else None
steps, delay = int(args[0]), float(args[1])
ckpt = Path(os.environ["ANYLAUNCH_CHECKPOINT_DIR"])
ckpt.mkdir(parents=True, exist_ok=True)
resume = os.environ.get("ANYLAUNCH_RESUME_FROM")
start = int(Path(resume).stem.split("-")[1]) if resume else 0
print(f"start={start} resume_from={resume}", flush=True)
if recipe:
    for line in Path(recipe).read_text().splitlines():
        if line.strip().startswith("path:"):
            print(f"recipe {line.strip()}", flush=True)
for step in range(start + 1, steps + 1):
    time.sleep(delay)
    tmp = ckpt / f"step-{step}.tmp"
    tmp.write_text(str(step))
    tmp.replace(ckpt / f"step-{step}.ckpt")
    print(f"step {step}", flush=True)
print("done", flush=True)
