"""A rank that joins the process group, says so, then waits forever (cancel tests)."""

import os
import sys
import time

import torch.distributed as dist

dist.init_process_group("gloo")
sys.stdout.write(
    f"ready rank={dist.get_rank()} pid={os.getpid()} port={os.environ['MASTER_PORT']}" + "\n"
)
while True:
    time.sleep(1)
