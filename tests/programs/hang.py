"""A DDP-style gloo job that hangs: every rank prints its first step, then rank STUCK_RANK
(default 2) waits on something that never comes while the others wait for it in an
all_reduce. Nothing is printed after the first step: the hang diagnosis's case."""

import os
import sys
import time

import torch
import torch.distributed as dist


def wait_for_data() -> None:
    """Stands for a read that never returns (a dead mount, a stuck DataLoader worker)."""
    while True:
        time.sleep(1)


dist.init_process_group("gloo")
rank = dist.get_rank()
sys.stdout.write(f"rank {rank}: step 1 loss 0.6931\n")
sys.stdout.flush()
if rank == int(os.environ.get("STUCK_RANK", "2")):
    wait_for_data()
total = torch.ones(1)
dist.all_reduce(total)
