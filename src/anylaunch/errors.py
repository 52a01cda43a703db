"""Errors that reach users: one line, a machine-readable code, and what to do about it.

Every error a user can cause derives from AnylaunchError so the CLI can print one line
(or a JSON object) and exit with the right status instead of a traceback.
"""

from __future__ import annotations

# Exit status of the CLI, per the user-facing contract.
EXIT_FAILED = 1  # the job (or the backend) failed
EXIT_USAGE = 2  # the input was wrong; nothing was submitted


class AnylaunchError(Exception):
    """An error with a stable code for `--json` output and a message for people."""

    code = "ERROR"
    exit_status = EXIT_FAILED

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def to_json(self) -> dict:
        return error_json(self.code, self.message)


class ConfigError(AnylaunchError):
    """Bad job file, override or pins: `FILE:LINE: key.path: what is wrong — how to fix`."""

    code = "CONFIG"
    exit_status = EXIT_USAGE

    def __init__(
        self,
        what: str,
        *,
        file: str | None = None,
        line: int | None = None,
        key: str | None = None,
        fix: str | None = None,
        code: str | None = None,
    ) -> None:
        self.file, self.line, self.key, self.what, self.fix = file, line, key, what, fix
        super().__init__(self._format(), code=code)

    def _format(self) -> str:
        where = ""
        if self.file:
            where = f"{self.file}:{self.line}: " if self.line else f"{self.file}: "
        key = f"{self.key}: " if self.key else ""
        fix = f" — {self.fix}" if self.fix else ""
        # One line, whatever the parts contain.
        return " ".join(f"{where}{key}{self.what}{fix}".split())


class UsageError(AnylaunchError):
    """Wrong command-line use (unknown job id, conflicting flags)."""

    code = "USAGE"
    exit_status = EXIT_USAGE


class JobNotFound(UsageError):
    code = "JOB_NOT_FOUND"


class BackendError(AnylaunchError):
    """The backend refused or failed an operation (submit, poll, cancel)."""

    code = "BACKEND"


class StoreError(AnylaunchError):
    """The job store cannot be opened, read or written (a read-only, damaged or missing
    file): nothing was submitted, and nothing already stored was touched."""

    code = "STORE"
    exit_status = EXIT_USAGE


class SubmitOutcomeUnknown(BackendError):
    """A submit whose answer was lost: the backend may hold the job, or may not.

    Never recorded as a failure: the job stays UNKNOWN and every later poll looks it up
    by what the submit named it (Slurm `--comment`, Lepton job name), adopting it if found.
    """

    code = "SUBMIT_OUTCOME_UNKNOWN"


def error_json(code: str, message: str) -> dict:
    """What `--json` prints for a command that failed (and an MCP tool error carries)."""
    return {"id": None, "kind": "error", "error": {"code": code, "message": message}}
