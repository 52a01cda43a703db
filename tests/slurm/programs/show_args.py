"""Prints each argument on its own line between markers, and a digest of HF_TOKEN."""

import hashlib
import os
import sys

for arg in sys.argv[1:]:
    sys.stdout.write(f"arg<{arg}>\n")
token = os.environ.get("HF_TOKEN", "")
key = os.environ.get("WANDB_API_KEY", "")
sys.stdout.write(f"hf_token_sha256={hashlib.sha256(token.encode()).hexdigest()}\n")
sys.stdout.write(f"wandb_key_sha256={hashlib.sha256(key.encode()).hexdigest()}\n")
sys.stdout.write(f"job_name={os.environ.get('SLURM_JOB_NAME')}\n")
