"""A stdlib-only training stand-in for bare images.

Reads every file staged into ./data, "trains" STEPS steps of SECONDS each, and on node 0
writes one checkpoint per step into $ANYLAUNCH_CHECKPOINT_DIR (resuming from the newest
complete one) and a summary into ./results. `python3 stdlib_trainer.py STEPS SECONDS`.
With HOLD_AT_STEP=K, the first attempt stops making progress after checkpoint K (as a
job does that is evicted mid-run): a test can then evict it without racing it.
"""

import os
import sys
import time
from pathlib import Path

steps, delay = int(sys.argv[1]), float(sys.argv[2])
node = os.environ.get("NODE_RANK", "0")
files = sorted(p.name for p in Path("data").iterdir()) if Path("data").is_dir() else []
print(f"node {node} inputs {files}", flush=True)
ckpt = Path(os.environ["ANYLAUNCH_CHECKPOINT_DIR"])
ckpt.mkdir(parents=True, exist_ok=True)
done = [int(p.stem.split("-")[1]) for p in ckpt.glob("step-*.ckpt")]
start = max(done, default=0)
if start:
    print(f"node {node} resumed from step {start}", flush=True)
for step in range(start + 1, steps + 1):
    time.sleep(delay)
    if node == "0":
        tmp = ckpt / f"step-{step}.tmp"
        tmp.write_text(str(step))
        tmp.replace(ckpt / f"step-{step}.ckpt")
    print(f"node {node} step {step}", flush=True)
    if str(step) == os.environ.get("HOLD_AT_STEP") and os.environ.get("ANYLAUNCH_ATTEMPT") == "1":
        print(f"node {node} holding at step {step}", flush=True)
        while True:
            time.sleep(1)
if node == "0":
    Path("results").mkdir(exist_ok=True)
    Path("results/summary.txt").write_text(f"trained on {','.join(files)} from step {start}\n")
print(f"node {node} done", flush=True)
