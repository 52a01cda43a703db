"""Train a tiny GPT-2 with the Hugging Face Trainer.

As the Trainer's documentation writes it: a model, a dataset and TrainingArguments; the
Trainer finds the processes torchrun started (RANK, LOCAL_RANK, WORLD_SIZE) and wraps
the model in DDP itself. The model is built from a small config and the data is
generated, so the script needs no download.
"""

import argparse

import torch
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments, set_seed


class CountingSequences(Dataset):
    """Token sequences that count upwards from a random start: easy to learn."""

    def __init__(self, size: int, length: int, vocab: int) -> None:
        starts = torch.randint(0, vocab, (size, 1), generator=torch.Generator().manual_seed(0))
        self.ids = (starts + torch.arange(length)) % vocab

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--output-dir", default="hf-trainer-out")
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--use-cpu", action="store_true")
    args = parser.parse_args()

    set_seed(0)
    config = GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=2)
    model = GPT2LMHeadModel(config)
    training_args = TrainingArguments(
        output_dir=args.output_dir,
        per_device_train_batch_size=8,
        learning_rate=5e-3,
        max_steps=args.max_steps,
        logging_steps=5,
        save_strategy="no",
        report_to="none",
        use_cpu=args.use_cpu,
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=CountingSequences(512, 16, config.vocab_size),
    )
    result = trainer.train()
    if trainer.is_world_process_zero():
        print(
            f"hf-trainer: world_size={training_args.world_size} steps={result.global_step}"
            f" train_loss={result.training_loss:.4f}"
        )


if __name__ == "__main__":
    main()
