"""Storage URIs: `s3://bucket/key` (an object or a prefix) and local paths.

A key becomes a path when it is staged (`<cache>/bucket/key`), so a key is refused here
as in the job: `key_problem`, the in-job runtime's own rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from anylaunch.node.runtime.cache import key_problem

_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")


@dataclass(frozen=True)
class S3Uri:
    bucket: str
    key: str  # "" for a whole bucket; a trailing "/" marks a prefix

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    @property
    def is_prefix(self) -> bool:
        return self.key == "" or self.key.endswith("/")

    def child(self, name: str) -> S3Uri:
        base = self.key if self.is_prefix or not self.key else self.key + "/"
        return S3Uri(self.bucket, base + name)


def scheme_of(text: str) -> str | None:
    match = _SCHEME.match(text)
    return match.group(1).lower() if match else None


def parse_s3(text: str) -> S3Uri:
    """Parse `s3://bucket/key`; ValueError says what to write instead."""
    scheme = scheme_of(text)
    if scheme != "s3":
        raise ValueError(
            f"'{text}' uses the {scheme}:// scheme; storage is S3-compatible: write s3://bucket/path"
            if scheme
            else f"'{text}' is not an s3:// URI; write s3://bucket/path"
        )
    bucket, _, key = text[len("s3://") :].partition("/")
    if not _BUCKET.match(bucket):
        raise ValueError(
            f"'{bucket}' is not a valid bucket name; use 3-63 of a-z, 0-9, '.' and '-'"
        )
    problem = key_problem(key)
    if problem:
        raise ValueError(f"'{text}': {problem}; write the path without '.' and '..' parts")
    return S3Uri(bucket, key)


def validate_location(text: str) -> str:
    """Job file values of `inputs`/`outputs`: an s3:// URI or a local path, nothing else."""
    if scheme_of(text) is None:
        return text  # a local path
    parse_s3(text)
    return text
