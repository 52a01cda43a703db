"""A tiny gloo job: every rank joins the process group and logs its place in it.

Started by torchrun (any backend); CPU only, so it runs on the devstack.
"""

import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
total = torch.ones(1)
dist.all_reduce(total)
print(
    f"rank {dist.get_rank()} node {os.environ.get('NODE_RANK')} local {os.environ['LOCAL_RANK']}"
    f" world size {dist.get_world_size()} sum {int(total.item())}",
    flush=True,
)
dist.barrier()
dist.destroy_process_group()
