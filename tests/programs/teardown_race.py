"""A small DDP training on gloo whose every rank prints its last line when training is
done, then ends as a torch program usually does: destroy_process_group and a normal
interpreter exit. With torch 2.13 on CPU, gloo's threads can outlive the process group,
and a rank then sometimes aborts while the interpreter finalizes ("terminate called
without an active exception", SIGABRT) after its work is done.

CRASH_AT=N instead aborts rank 1 the same way in the middle of training, at step N
(std::terminate with no exception, as a C++ thread dying in an extension does).
FAIL_AFTER=1 makes rank 0 raise after training, when it saves its weights.
"""

import ctypes
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def say(message: str) -> None:
    # One write per line: the ranks of a node share one log file.
    sys.stdout.write(message + "\n")
    sys.stdout.flush()


dist.init_process_group("gloo")
rank = dist.get_rank()
steps = int(os.environ.get("STEPS", "10"))
crash_at = int(os.environ.get("CRASH_AT", "0"))
torch.manual_seed(0)
model = DistributedDataParallel(torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(1, steps + 1):
    x = torch.randn(32, 8)
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if rank == 0:
        say(f"step {step} loss {loss.item():.4f}")
    if step == crash_at and rank == 1:
        sys.stdout.flush()
        ctypes.CDLL("libstdc++.so.6")._ZSt9terminatev()  # std::terminate()
say(f"rank {rank}: training finished after {steps} steps")
if os.environ.get("FAIL_AFTER") and rank == 0:
    torch.save(model.module.state_dict(), "/nonexistent/output/model.pt")
dist.destroy_process_group()
