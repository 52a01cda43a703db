"""The slurm backend."""
