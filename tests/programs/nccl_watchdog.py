"""A gloo world whose first attempt dies the way a rank does when ProcessGroupNCCL's
watchdog catches a timed-out collective: it logs what the watchdog logs, the exception
escapes the watchdog's thread, and std::terminate aborts the process (SIGABRT).

The lines are the real ones (pytorch/pytorch torch/csrc/distributed/c10d/
ProcessGroupNCCL.cpp: checkTimeout, handleException, the watchdog's run), with this
rank's number. Later attempts train to the end. Every attempt prints its attempt number
and run key, so a test can tell the attempts apart and see the key stay the same.
"""

import os
import sys
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
attempt = int(os.environ["ANYLAUNCH_ATTEMPT"])
print(
    f"rank={rank} attempt={attempt} run_key={os.environ['ANYLAUNCH_RUN_KEY']}"
    f" wandb={os.environ.get('WANDB_RUN_ID')}/{os.environ.get('WANDB_RESUME')}",
    flush=True,
)
total = torch.ones(1)
dist.all_reduce(total)
if attempt == 1:
    stamp = time.strftime("E%m%d %H:%M:%S.000000000", time.localtime())
    work = (
        f"[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=78,"
        " OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600043"
        " milliseconds before timing out."
    )
    pg = f"[PG ID 0 PG GUID 0(default_pg) Rank {rank}]"
    lines = [
        f"[rank{rank}]:[{stamp} ProcessGroupNCCL.cpp:685] {work}",
        f"[rank{rank}]:[{stamp} ProcessGroupNCCL.cpp:818] [Rank {rank}] Some NCCL operations"
        " have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent"
        " GPU operations might run on corrupted/incomplete data.",
        f"[rank{rank}]:[{stamp} ProcessGroupNCCL.cpp:832] [Rank {rank}] To avoid data"
        " inconsistency, we are taking the entire process down.",
        f"[rank{rank}]:[{stamp} ProcessGroupNCCL.cpp:2197] {pg} Process group watchdog thread"
        f" terminated with exception: {work}",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
        f"  what():  {pg} Process group watchdog thread terminated with exception: {work}",
    ]
    sys.stderr.write("\n".join(lines) + "\n")
    sys.stderr.flush()
    os.abort()
print(f"rank={rank} trained (sum {total.item():.0f})", flush=True)
dist.destroy_process_group()
