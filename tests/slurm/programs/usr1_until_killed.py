"""Waits for the time limit; reports USR1 (the early warning) and the deadline it was given."""

import os
import signal
import sys
import time


def on_usr1(_signum, _frame):
    left = int(os.environ["ANYLAUNCH_DEADLINE"]) - time.time()
    sys.stdout.write(f"got USR1 {left:.0f}s before the deadline\n")
    sys.stdout.flush()


signal.signal(signal.SIGUSR1, on_usr1)
sys.stdout.write(
    f"waiting; deadline in {int(os.environ['ANYLAUNCH_DEADLINE']) - time.time():.0f}s\n"
)
sys.stdout.flush()
while True:
    time.sleep(0.5)
