"""Handles no signal, and ends well soon after the early signal arrived: a program whose
work ends in the last minutes before its time limit. It waits until the batch shell says
that it passes the signal on (in node 0's log), then a little longer, while the step that
passes it on looks for a rank that handles it."""

import os
import sys
import time

log = os.path.join(os.environ["ANYLAUNCH_JOB_DIR"], "logs", "node-0.log")
deadline = time.time() + 240
while time.time() < deadline:
    with open(log, errors="replace") as handle:
        if "passing it to the ranks that handle it" in handle.read():
            break
    time.sleep(0.5)
else:
    sys.exit("the early signal never came")
time.sleep(3)
print("work done, with no handler for the early signal", flush=True)
