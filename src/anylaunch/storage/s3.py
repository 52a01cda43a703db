"""The S3 client from TAO's variables (S3_ENDPOINT_URL, ACCESS_KEY, SECRET_KEY,
CLOUD_REGION), else AWS's variables and shared credentials file.

It is the in-job runtime's own client, so the pre-submit checks and the job speak S3
through one implementation.
"""

from __future__ import annotations

from collections.abc import Mapping

from anylaunch.node.runtime.s3 import Client, Credentials, S3Error, error_code

__all__ = ["Client", "S3Error", "client", "error_code", "has_credentials"]


def client(environ: Mapping[str, str] | None = None) -> Client:
    return Client(Credentials.from_env(None if environ is None else dict(environ)))


def has_credentials(environ: Mapping[str, str] | None = None) -> bool:
    return Credentials.from_env(None if environ is None else dict(environ)).present
