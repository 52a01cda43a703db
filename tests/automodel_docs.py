"""AutoModel's launcher documentation blocks, verbatim: the Slurm example and the SkyPilot
spot example with the resume keys it recommends. The tests that check anylaunch takes a
job file as AutoModel's users write it share them (importable as `automodel_docs`)."""

SLURM_BLOCK = """\
slurm:
  job_name: llm_finetune
  nodes: 2
  ntasks_per_node: 8
  time: "04:00:00"
  account: my_account
  partition: batch
  container_image: nvcr.io/nvidia/nemo:dev
  hf_home: ~/.cache/huggingface
  extra_mounts:
    - source: /data
      dest: /data
  env_vars:
    WANDB_API_KEY: "${WANDB_API_KEY}"
    HF_TOKEN: "${HF_TOKEN}"
"""
SKYPILOT_BLOCK = """\
skypilot:
  cloud: aws
  accelerators: "H100:8"
  num_nodes: 2
  use_spot: true
  disk_size: 200
  region: us-east-1
  setup: "pip install nemo-automodel"
  env_vars:
    HF_TOKEN: "${HF_TOKEN}"
"""
SPOT_RECIPE = (
    "step_scheduler:\n  checkpoint_interval: 100\nrestore_from:\n  path: /checkpoints/latest\n"
)
