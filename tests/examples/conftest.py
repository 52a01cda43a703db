"""The devstack fixtures the gallery's runs share with the Slurm and staging tests."""

from slurm.conftest import leave_no_job_behind, slurm_conf  # noqa: F401 - the devstack Slurm
from storage.conftest import bucket, cli_env, s3client, s3env  # noqa: F401 - the devstack S3
