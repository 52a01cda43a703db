"""A program whose first attempts fail, each the way FAIL_AS says, and whose later ones
succeed: `exception` raises a Python exception (the program's own error), `nccl` dies
as a rank does when NCCL's watchdog catches a timed-out collective (its line, then
SIGABRT), `xid` as a job on a GPU that fell off the bus (the kernel's Xid 79 line
on the node's log). FAIL_UNTIL is the last attempt that fails (default 1); a file of attempts
started, ATTEMPTS_FILE, lets a test count them."""

import os
import sys
import time

attempt = int(os.environ["ANYLAUNCH_ATTEMPT"])
node = os.environ.get("SLURMD_NODENAME", "")
print(f"attempt={attempt} run_key={os.environ['ANYLAUNCH_RUN_KEY']} node={node}", flush=True)
if os.environ.get("ATTEMPTS_FILE"):
    with open(os.environ["ATTEMPTS_FILE"], "a") as out:
        out.write(f"{attempt}\n")
time.sleep(float(os.environ.get("SLEEP", "0")))
if attempt <= int(os.environ.get("FAIL_UNTIL", "1")):
    if os.environ.get("FAIL_AS") == "exception":
        raise ValueError("the learning rate schedule needs warmup_steps < total_steps")
    if os.environ.get("FAIL_AS") == "xid":
        # The driver's line as the kernel log has it (NVIDIA's Xid catalog: 79, GPU has
        # fallen off the bus), then CUDA's error in the program, which exits 1.
        sys.stderr.write(
            "NVRM: Xid (PCI:0000:3b:00): 79, pid=2114, name=python, GPU has fallen off the"
            " bus.\nRuntimeError: CUDA error: unspecified launch failure\n"
        )
        sys.exit(1)
    sys.stderr.write(
        "[rank0]:[E1218 20:27:21.426415540 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught"
        " collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1,"
        " NumelOut=1, Timeout(ms)=600000) ran for 600081 milliseconds before timing out.\n"
    )
    sys.stderr.flush()
    os.abort()
print("done", flush=True)
