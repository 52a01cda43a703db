"""A rank that aborts in Python's teardown, as torch's gloo group sometimes does at exit.

ABORT_WHEN: `teardown` (default) aborts after the work ended, once the interpreter
destroys modules; `work` aborts during the work; `handler` in an exit handler of the
program's own. EXIT_STATUS: the status the program itself exits with (default 0).
"""

import atexit
import json
import os
import sys


class AbortsWhenDestroyed:
    def __del__(self) -> None:
        os.abort()


when = os.environ.get("ABORT_WHEN", "teardown")
print(f"rank {os.environ.get('RANK')} argv={sys.argv[1:]} main={__name__}", flush=True)
if when == "work":
    os.abort()
if when == "handler":
    atexit.register(os.abort)
json.teardown_aborter = AbortsWhenDestroyed()  # a module's attribute: destroyed last
sys.exit(int(os.environ.get("EXIT_STATUS", "0")))
