"""Print the rendezvous variables a program sees (launcher: none)."""

import os
import sys

keys = [
    "MASTER_ADDR",
    "MASTER_PORT",
    "NNODES",
    "NODE_RANK",
    "NUM_GPU_PER_NODE",
    "WORLD_SIZE",
    "SPECIAL",
]
sys.stdout.write(" ".join(f"{k}={os.environ.get(k)}" for k in keys) + "\n")
