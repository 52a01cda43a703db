"""A small real DDP training: ranks fit a linear model, on CPU with gloo, or on their
GPU with NCCL where torch sees one.

Started by torchrun (which sets RANK, LOCAL_RANK, WORLD_SIZE); anylaunch adds NODE_RANK,
NNODES and MASTER_ADDR/PORT. Prints its loss each step and saves a checkpoint (at the end,
and every --save-every steps) that a rerun resumes from.
"""

import argparse
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def say(message: str) -> None:
    """One write per line: ranks of a node share one log, and torchrun runs Python unbuffered."""
    sys.stdout.write(message + "\n")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--checkpoint-dir", default=os.environ.get("CHECKPOINT_DIR", "checkpoints"))
    parser.add_argument("--save-every", type=int, default=0, help="steps between checkpoints")
    args = parser.parse_args()

    on_gpu = torch.cuda.is_available()
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if on_gpu else torch.device("cpu")
    if on_gpu:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if on_gpu else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    say(
        f"rank={rank} local_rank={os.environ['LOCAL_RANK']} node_rank={os.environ['NODE_RANK']}"
        f" world_size={world} master={os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
    )
    torch.manual_seed(0)
    model = DistributedDataParallel(
        torch.nn.Linear(8, 1).to(device), device_ids=[device.index] if on_gpu else None
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    ckpt = Path(args.checkpoint_dir) / "latest.pt"
    start = 0
    if ckpt.exists():
        state = torch.load(ckpt, map_location=device, weights_only=True)
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"]
        if rank == 0:
            say(f"resumed from {ckpt} at step {start}")

    true_w = (torch.arange(8, dtype=torch.float32).unsqueeze(1) / 8).to(device)
    gen = torch.Generator().manual_seed(1000 + rank)
    for step in range(start, start + args.steps):
        x = torch.randn(32, 8, generator=gen).to(device)
        loss = torch.nn.functional.mse_loss(model(x), x @ true_w)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        reduced = loss.detach().clone()
        dist.all_reduce(reduced)
        if rank == 0:
            say(f"step {step + 1} loss {reduced.item() / world:.4f}")
        done = step + 1
        if (
            rank == 0
            and args.save_every
            and done % args.save_every == 0
            and done < start + args.steps
        ):
            save(ckpt, model, optimizer, done)

    if rank == 0:
        save(ckpt, model, optimizer, start + args.steps)
    dist.barrier()
    dist.destroy_process_group()
    # Gloo's threads (pt_gloo_runloop, gloo_tcp_loop) outlive destroy_process_group. If
    # the interpreter then finalizes while they run, one that needs the GIL is torn down
    # mid-call and the rank aborts ("terminate called without an active exception")
    # after its work is done. Every rank has passed the last barrier here and the
    # checkpoint is saved: end the process without interpreter finalization.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def save(
    ckpt: Path, model: DistributedDataParallel, optimizer: torch.optim.Optimizer, step: int
) -> None:
    ckpt.parent.mkdir(parents=True, exist_ok=True)
    tmp = ckpt.with_suffix(".tmp")
    state = {"model": model.module.state_dict(), "optimizer": optimizer.state_dict(), "step": step}
    torch.save(state, tmp)
    tmp.replace(ckpt)  # a checkpoint is complete or absent, never half-written
    say(f"saved checkpoint {ckpt} at step {step}")


if __name__ == "__main__":
    main()
