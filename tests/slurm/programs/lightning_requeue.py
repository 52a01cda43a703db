"""A Lightning training that needs longer than its Slurm time limit, run with Lightning's
own SLURMEnvironment(auto_requeue=True): before the limit its SIGUSR1 handler saves an
HPC checkpoint and runs `scontrol requeue`, and the next run resumes from it. Nothing
here handles the signal itself: the handler is Lightning's, and it is installed only if
the rank starts with SIGUSR1 as the default.

Each epoch is one step of STEP_S seconds; EPOCHS of them make the whole training."""

import os
import time

import lightning as L
import torch
from lightning.pytorch.plugins.environments import SLURMEnvironment

EPOCHS = int(os.environ.get("EPOCHS", "25"))
STEP_S = float(os.environ.get("STEP_S", "4"))


class Slow(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, _index):
        time.sleep(STEP_S)
        print(f"epoch {self.current_epoch} step {self.global_step}", flush=True)
        return self.layer(batch).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


root = os.environ["CKPT_ROOT"]
trainer = L.Trainer(
    accelerator="cpu",
    devices=1,
    num_nodes=1,
    max_epochs=EPOCHS,
    plugins=[SLURMEnvironment(auto_requeue=True)],
    default_root_dir=root,
    enable_progress_bar=False,
    enable_model_summary=False,
    enable_checkpointing=False,
    logger=False,
)
data = torch.utils.data.DataLoader(torch.randn(1, 4), batch_size=1)
print(
    f"attempt={os.environ['ANYLAUNCH_ATTEMPT']} restart={os.environ.get('SLURM_RESTART_COUNT', 0)}"
    f" hpc_checkpoints={sorted(f for f in os.listdir(root) if f.startswith('hpc_ckpt'))}",
    flush=True,
)
trainer.fit(Slow(), data)
print(f"trained to epoch {trainer.current_epoch}", flush=True)
