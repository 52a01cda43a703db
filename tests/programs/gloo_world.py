"""A tiny gloo job: every rank joins the process group and logs its place in it.

Started by torchrun (any backend); CPU only, so it runs on the devstack.
"""

import os
import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
total = torch.ones(1)
dist.all_reduce(total)
# One write per line: the ranks of a node share one log file, and print() with
# PYTHONUNBUFFERED sends the text and its newline as two writes that another rank's
# line can fall between.
sys.stdout.write(
    f"rank {dist.get_rank()} node {os.environ.get('NODE_RANK')} local {os.environ['LOCAL_RANK']}"
    f" world size {dist.get_world_size()} sum {int(total.item())}\n"
)
sys.stdout.flush()
dist.barrier()
dist.destroy_process_group()
