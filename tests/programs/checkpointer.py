"""Writes checkpoint directories step_N (marked complete with `.complete`) and, when
CRASH_AT is reached, dies in the middle of writing that one. Prints what it resumed."""

import os
import sys
from pathlib import Path

root = Path(os.environ["CKPT"])
root.mkdir(parents=True, exist_ok=True)
start = os.environ.get("ANYLAUNCH_RESUME_FROM")
sys.stdout.write(f"attempt={os.environ.get('ANYLAUNCH_ATTEMPT')} resume_from={start}\n")
step = int(Path(start).name.split("_")[-1]) if start else 0
crash_at = int(os.environ.get("CRASH_AT", "0"))
while step < 5:
    step += 1
    folder = root / f"step_{step}"
    folder.mkdir(exist_ok=True)
    (folder / "weights.bin").write_bytes(b"x" * 1024)
    if step == crash_at and os.environ.get("ANYLAUNCH_ATTEMPT") == "1":
        os._exit(9)  # killed mid-write: no completion marker
    (folder / ".complete").write_text("")
sys.stdout.write(f"done at step {step}\n")
