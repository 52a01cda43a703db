"""A check before launch: ok, warn or fail, with the fix. The common preflight and each
backend's own `preflight` produce them alike; `run` stops on a failure."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

Status = Literal["ok", "warn", "fail"]


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    message: str
    fix: str | None = None

    def to_json(self) -> dict[str, str | None]:
        return {"id": self.name, "kind": "check", **asdict(self)}


class Checks(list[Check]):
    """Checks in the order they ran; `ok`, `warn` and `fail` add one."""

    def ok(self, name: str, message: str) -> None:
        self.append(Check(name, "ok", message))

    def warn(self, name: str, message: str, fix: str | None) -> None:
        self.append(Check(name, "warn", message, fix))

    def fail(self, name: str, message: str, fix: str | None) -> None:
        self.append(Check(name, "fail", message, fix))


def failed(checks: list[Check]) -> list[Check]:
    return [c for c in checks if c.status == "fail"]
