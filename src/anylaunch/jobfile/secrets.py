"""Which values are secrets, and how to keep them out of what we print and store.

Secrets travel as references (an environment variable's name) and are resolved in the
process that needs them; everything persisted or printed goes through `mask`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from functools import cache

_SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSW(OR)?D|API_?KEY|ACCESS_KEY|PRIVATE_KEY|NGC_KEY|CREDENTIAL|AUTH|CLOUD_METADATA",
    re.IGNORECASE,
)
MASK = "***"
MIN_SECRET = 4  # shorter values ("1", "true") would mask ordinary text everywhere


@cache  # a run's every split asks about the same few names
def is_secret_name(name: str) -> bool:
    """True for names such as HF_TOKEN, WANDB_API_KEY, SECRET_KEY, LEPTON_AUTH_TOKEN."""
    return bool(_SECRET_NAME.search(name))


def name_pattern() -> str:
    """The secret-name rule as a regular expression (matched case-insensitively), for
    code that runs where anylaunch is not installed: a node masking what it prints."""
    return _SECRET_NAME.pattern


def masked_env(env: Mapping[str, str]) -> dict[str, str]:
    """An environment as the store and the screen keep it: secret values replaced by `***`."""
    return {k: (MASK if is_secret_name(k) else v) for k, v in env.items()}


def mask(text: str, secrets: Iterable[str]) -> str:
    """Replace every occurrence of each secret value (longest first) with `***`."""
    for value in sorted({s for s in secrets if s and len(s) >= MIN_SECRET}, key=len, reverse=True):
        text = text.replace(value, MASK)
    return text


def secret_values(names: Iterable[str] = (), environ: Mapping[str, str] | None = None) -> set[str]:
    """The values to mask in a job's output: every variable of `environ` whose name looks
    like a secret, and the named ones.

    Logs are masked a line at a time (a reader may start at any line), so a value that
    spans lines (a PEM key) is masked by each of its lines as well: no line of it can
    pass on its own.
    """
    environ = os.environ if environ is None else environ
    wanted = {k for k in environ if is_secret_name(k)} | set(names)
    values = {environ[k] for k in wanted if environ.get(k)}
    return values | {line for v in values for line in v.splitlines() if len(line) >= MIN_SECRET}
