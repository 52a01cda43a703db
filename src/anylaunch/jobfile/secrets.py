"""Which values are secrets, and how to keep them out of what we print and store.

Secrets travel as references (an environment variable's name) and are resolved in the
process that needs them; everything persisted or printed goes through `mask`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

# A name is a secret's when it holds one of the words secret scanners key on (gitleaks'
# generic rule: key, token, secret, password, credential, auth; Django's and Sentry's
# scrubbers much the same). Unambiguous words count anywhere in the name (HF_TOKEN,
# PGPASSWORD, MYAPIKEY); short ones only as a whole part between underscores or ends, so
# OPENAI_KEY, SSH_KEY, DB_PASS, MYSQL_PWD and BASIC_AUTH are secrets while
# KEYBOARD_LAYOUT, MONKEY_PATCH, PASSES, PWD, GIT_AUTHOR_NAME and COMPASS_DIR are not.
# ANYLAUNCH_RUN_KEY, which anylaunch sets to the job's id for experiment trackers, is
# an ordinary value: masking it would hide the job's id in every log.
# README.md lists the same rule: change both together.
_PART = r"(?<![A-Z0-9])(?:{})(?![A-Z0-9])"
_SECRET_NAME = re.compile(
    "|".join(
        [
            r"TOKEN|SECRET|PASSW(?:OR)?D|PASSPHRASE|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY",
            r"CLOUD_METADATA",
            r"(?<!^ANYLAUNCH_RUN_)" + _PART.format(r"KEYS?"),
            _PART.format(r"PASS|CREDS|AUTH|AUTHORIZATION|COOKIE"),
            r"(?<=[A-Z0-9]_)PWD(?![A-Z0-9])",  # MYSQL_PWD; never PWD, the working directory
        ]
    ),
    re.IGNORECASE,
)
MASK = "***"
MIN_SECRET = 4  # shorter values ("1", "true") would mask ordinary text everywhere


@cache  # a run's every split asks about the same few names
def is_secret_name(name: str) -> bool:
    """True for names such as HF_TOKEN, WANDB_API_KEY, OPENAI_KEY, DB_PASS, LEPTON_AUTH_TOKEN."""
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


def mask_data(value: Any, secrets: Iterable[str]) -> Any:
    """A JSON-like structure with every string in it masked (keys stay: they are names)."""
    if isinstance(value, str):
        return mask(value, secrets)
    if isinstance(value, dict):
        return {k: mask_data(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_data(v, secrets) for v in value]
    return value


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
