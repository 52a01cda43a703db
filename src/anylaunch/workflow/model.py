"""A loaded workflow: its steps (each a validated job), their needs and data handoffs.

Plain data and pure questions about it (order, levels, which steps a run covers): what
is done with a workflow (start, status, retry) is `anylaunch.workflow.api`'s."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from anylaunch.errors import UsageError
from anylaunch.workflow import graph

if TYPE_CHECKING:
    from anylaunch.jobfile.spec import JobSpec

SHARED = "shared"  # the consumer reads the producer's output where it was written
S3 = "s3"  # the consumer downloads it from S3


@dataclass
class Handoff:
    """One input of a step that is an output of an earlier step."""

    input: str  # the consumer's input path
    step: str  # the producing step
    output: str  # the producer's output path
    uri: str  # where the data lives in S3
    via: str  # SHARED or S3
    filesystem: str | None = None  # with SHARED: the filesystem both steps see

    def to_json(self) -> dict[str, Any]:
        return {"id": self.input, "kind": "handoff", **asdict(self)}

    def describe(self) -> str:
        where = f"shared filesystem {self.filesystem}" if self.via == SHARED else "S3"
        return f"{self.input} <- {self.step}.outputs.{self.output} ({self.uri}) via {where}"


@dataclass
class Step:
    id: str
    spec: JobSpec
    backend: str
    needs: list[str]
    handoffs: list[Handoff] = field(default_factory=list)

    @property
    def splits(self) -> int | None:
        """How many splits the step runs as (None: one job)."""
        return len(self.spec.split_values()) if self.spec.splits is not None else None


@dataclass
class Workflow:
    """A workflow file, loaded: what `run`, `--dry-run` and the controller work from.
    Plain data: starting it is `anylaunch.workflow.start(workflow)`."""

    file: str
    name: str
    steps: dict[str, Step]
    # The stored workflow that steps started one by one (`execute_step`) belong to: set
    # by the first of them, so later calls add to the same record.
    recorded_id: str | None = None

    def needs(self) -> dict[str, list[str]]:
        return {sid: step.needs for sid, step in self.steps.items()}

    def levels(self) -> list[list[str]]:
        return graph.levels(self.needs())

    def order(self) -> list[str]:
        return graph.order(self.needs())

    def select(self, only: str | None = None, start: str | None = None) -> list[str]:
        """The steps a run covers: all, `--only STEP`, or `--from STEP` and every step
        after it. Steps left out count as done: their outputs are read where they are."""
        for flag, value in (("--only", only), ("--from", start)):
            if value is not None and value not in self.steps:
                raise UsageError(
                    f"{flag}: no step '{value}' in {self.file} — steps: {', '.join(self.steps)}"
                )
        if only is not None and start is not None:
            raise UsageError("give --only or --from, not both")
        if only is not None:
            return [only]
        if start is not None:
            wanted = graph.after(self.needs(), [start])
            return [s for s in self.order() if s in wanted]
        return self.order()
