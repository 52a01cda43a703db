"""Fit a small regression with Hugging Face Accelerate.

The training loop of Accelerate's quick tour and its examples (`--cpu` as in
`nlp_example.py`): `Accelerator()` finds the processes that `accelerate launch` started, `prepare` wraps the model, optimizer and data loader for
them, and `accelerator.backward` replaces `loss.backward`.
"""

import argparse

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--cpu", action="store_true", help="If passed, will train on the CPU.")
    args = parser.parse_args()

    accelerator = Accelerator(cpu=args.cpu)
    set_seed(0)
    x = torch.randn(512, 8)
    y = x @ (torch.arange(8, dtype=torch.float32).unsqueeze(1) / 8)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    model = nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

    for epoch in range(args.epochs):
        model.train()
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(inputs), targets)
            accelerator.backward(loss)
            optimizer.step()
        mean = accelerator.gather(loss.detach().reshape(1)).mean().item()
        accelerator.print(
            f"accelerate: epoch {epoch + 1} loss {mean:.4f} processes={accelerator.num_processes}"
        )
    accelerator.end_training()


if __name__ == "__main__":
    main()
