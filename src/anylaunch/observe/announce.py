"""What a local job's supervisor runs once the job's end is stored, to announce it now:

    python -m anylaunch.observe.announce JOB_ID

A process of its own, so that the supervisor imports nothing of diagnosis; what it cannot
deliver, the next command that polls the job delivers (`notify.announce`).
"""

from __future__ import annotations

import sys

from anylaunch.observe import notify
from anylaunch.observe.watch import Job
from anylaunch.store import Store


def main(argv: list[str]) -> int:
    store = Store()
    record = store.get(argv[0])
    notify.announce(
        store,
        [record],
        lambda r: Job(r, store).diagnose(),
        tries=notify.SUPERVISOR_TRIES,
        by="supervisor",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
