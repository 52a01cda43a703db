"""Errors of the Lepton client: each one line that says what to do."""

from __future__ import annotations

from anylaunch.errors import BackendError, UsageError


class LeptonError(BackendError):
    """The Lepton API refused or failed a call."""

    code = "LEPTON"

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None):
        super().__init__(message, code=code)
        self.status = status


class LeptonAuthError(LeptonError):
    """401/403: never retried, because a bad token does not get better by asking again."""

    code = "LEPTON_AUTH"


class LeptonNotFound(LeptonError):
    code = "LEPTON_NOT_FOUND"


class LeptonUnavailable(LeptonError):
    """5xx, 429 or no connection, still failing after every retry."""

    code = "LEPTON_UNAVAILABLE"


class LeptonCredentialsMissing(UsageError):
    code = "LEPTON_CREDENTIALS"
