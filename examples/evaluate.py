"""Score a checkpoint of ddp_demo.py on data it has not seen: the last step of
workflow.yaml. One process, CPU; reads the checkpoint file it is given."""

import argparse

import torch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint", default="trained/latest.pt")
    args = parser.parse_args()

    state = torch.load(args.checkpoint, map_location="cpu", weights_only=True)
    model = torch.nn.Linear(8, 1)
    model.load_state_dict(state["model"])
    x = torch.randn(1024, 8, generator=torch.Generator().manual_seed(7))
    y = x @ (torch.arange(8, dtype=torch.float32).unsqueeze(1) / 8)
    with torch.no_grad():
        loss = torch.nn.functional.mse_loss(model(x), y).item()
    print(f"evaluate: checkpoint at step {state['step']} has held-out loss {loss:.4f}")


if __name__ == "__main__":
    main()
