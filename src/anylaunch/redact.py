"""Which values are secrets, and how to keep them out of what we print and store.

Secrets travel as references (an environment variable's name) and are resolved in the
process that needs them; everything persisted or printed goes through `mask`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSW(OR)?D|API_?KEY|ACCESS_KEY|PRIVATE_KEY|NGC_KEY|CREDENTIAL|AUTH|CLOUD_METADATA",
    re.IGNORECASE,
)
MASK = "***"


def is_secret_name(name: str) -> bool:
    """True for names such as HF_TOKEN, WANDB_API_KEY, SECRET_KEY, LEPTON_AUTH_TOKEN."""
    return bool(_SECRET_NAME.search(name))


def mask(text: str, secrets: Iterable[str]) -> str:
    """Replace every occurrence of each secret value (longest first) with `***`."""
    for value in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(value, MASK)
    return text
