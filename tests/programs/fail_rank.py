"""Every rank joins; the rank named by FAIL_RANK exits with status 3, the others wait."""

import os
import sys
import time

import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
sys.stdout.write(f"rank={rank} up" + "\n")
if rank == int(os.environ["FAIL_RANK"]):
    sys.stdout.write("boom\n")
    sys.exit(3)
time.sleep(600)
