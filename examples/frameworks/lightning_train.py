"""Fit a small regression with PyTorch Lightning's Trainer and DDP.

Written as Lightning's documentation writes a multi-node script: the Trainer is told the
devices per node and the number of nodes, and finds the rest (ranks, master address)
in the environment its launcher sets. Nothing here knows which launcher that was.
"""

import argparse

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class LitRegressor(L.LightningModule):
    def __init__(self, lr: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.layer = nn.Linear(8, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss, sync_dist=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


def devices(value: str):
    return value if value == "auto" else int(value)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--accelerator", default="auto")
    parser.add_argument("--devices", type=devices, default="auto", help="per node")
    parser.add_argument("--num-nodes", type=int, default=1)
    parser.add_argument("--max-epochs", type=int, default=3)
    parser.add_argument("--root-dir", default="lightning_logs")
    args = parser.parse_args()

    L.seed_everything(0)
    x = torch.randn(512, 8)
    y = x @ (torch.arange(8, dtype=torch.float32).unsqueeze(1) / 8)
    loader = DataLoader(TensorDataset(x, y), batch_size=32)

    trainer = L.Trainer(
        accelerator=args.accelerator,
        devices=args.devices,
        num_nodes=args.num_nodes,
        strategy="ddp",
        max_epochs=args.max_epochs,
        default_root_dir=args.root_dir,
        enable_progress_bar=False,
    )
    trainer.fit(LitRegressor(), loader)
    if trainer.is_global_zero:
        loss = trainer.callback_metrics["train_loss"].item()
        print(
            f"lightning: world_size={trainer.world_size} epochs={trainer.current_epoch} train_loss={loss:.4f}"
        )


if __name__ == "__main__":
    main()
