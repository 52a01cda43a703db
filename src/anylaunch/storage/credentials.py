"""Storage credentials for the job (TAO's CLOUD_METADATA too), and the pre-submit check.

The job gets the variables TAO's Lepton SDK uses (S3_ENDPOINT_URL, ACCESS_KEY, SECRET_KEY, CLOUD_REGION)
and, for TAO containers, CLOUD_METADATA: `{"aws": {bucket: {access_key, secret_key,
region, endpoint_url}}}`, since their entrypoints look credentials up per bucket under
the URI's protocol key. Key names mark them as secrets, so they travel as secrets.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from anylaunch.errors import ConfigError
from anylaunch.node.runtime.cache import key_problem
from anylaunch.storage import s3
from anylaunch.storage.uri import parse_s3

if TYPE_CHECKING:
    from anylaunch.jobfile.spec import JobSpec

S3_VARS = ("S3_ENDPOINT_URL", "ACCESS_KEY", "SECRET_KEY", "CLOUD_REGION")


def job_env(spec: JobSpec, environ: Mapping[str, str]) -> dict[str, str]:
    uris = spec.s3_uris()
    if not uris:
        return {}
    env = {name: environ[name] for name in S3_VARS if environ.get(name)}
    if env.get("ACCESS_KEY") and env.get("SECRET_KEY"):
        creds = {
            "access_key": env["ACCESS_KEY"],
            "secret_key": env["SECRET_KEY"],
            "region": env.get("CLOUD_REGION", "us-east-1"),
        }
        if env.get("S3_ENDPOINT_URL"):
            creds["endpoint_url"] = env["S3_ENDPOINT_URL"]
        buckets = sorted({parse_s3(uri).bucket for uri in uris})
        env["CLOUD_METADATA"] = json.dumps(
            {"aws": {b: creds for b in buckets}}, separators=(",", ":")
        )
    return env


def with_job_env(spec: JobSpec, environ: Mapping[str, str]) -> JobSpec:
    """The spec with storage settings added to `env`; what the job file sets wins."""
    extra = job_env(spec, environ)
    if not extra:
        return spec
    return spec.model_copy(update={"env": {**extra, **spec.env}})


def check_readable(spec: JobSpec, environ: Mapping[str, str]) -> None:
    """Every S3 input exists and is readable, every output bucket reachable: exit 2 if not.

    Metadata calls only (HEAD, or a one-key LIST for prefixes), before anything is
    stored or submitted, so a typo in a path costs seconds, not a queued job.
    """
    if not spec.s3_uris():
        return
    client = s3.client(environ)
    for path, item in spec.inputs.items():
        if not item.uri.startswith("s3://"):
            continue
        uri = parse_s3(item.uri)
        try:
            if not uri.is_prefix:
                try:
                    client.head_object(uri.bucket, uri.key)
                    continue
                except s3.S3Error as exc:
                    if exc.status != 404:
                        raise
            prefix = uri.key if uri.is_prefix else uri.key + "/"
            found = next(iter(client.list_objects(uri.bucket, prefix, max_keys=1)), None)
        except s3.S3Error as exc:
            raise _unreadable(spec, f"inputs.{path}", item.uri, exc.code) from None
        if found is None:
            raise _unreadable(spec, f"inputs.{path}", item.uri, "no such object or prefix")
        # Path safety: the job refuses every key with a '.' or '..' part before it
        # writes a byte. S3 lists in byte order, where '.' comes before digits and
        # letters, so such a key right under the prefix is the one listed here: it is
        # refused now, before a job is queued for it.
        problem = key_problem(found[0])
        if problem:
            raise ConfigError(
                f"{item.uri} holds s3://{uri.bucket}/{found[0]}: {problem}",
                file=spec.source,
                key=f"inputs.{path}",
                fix="rename that object in the bucket (its key without '.' and '..' parts)",
                code="STORAGE",
            )
    for path, target in spec.outputs.items():
        uri = parse_s3(target)
        try:
            client.head_bucket(uri.bucket)
        except s3.S3Error as exc:
            raise _unreadable(spec, f"outputs.{path}", target, f"bucket {exc.code}") from None


def _unreadable(spec: JobSpec, key: str, uri: str, why: str) -> ConfigError:
    return ConfigError(
        f"{uri} is not readable ({why})",
        file=spec.source,
        key=key,
        fix="check the exact path and ACCESS_KEY/SECRET_KEY/S3_ENDPOINT_URL (aws s3 ls can confirm it)",
        code="STORAGE",
    )
