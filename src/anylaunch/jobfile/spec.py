"""JobSpec: what to run, independent of where (the neutral half of a job file).

The backend sections (`local:`, `slurm:`, `skypilot:`, `lepton:`, a registered backend's)
hang off the spec as their own models, each declared in its backend's folder and found
through the backend registry; routing picks one of them. Sizes have a neutral spelling (`nodes`,
`gpus_per_node`, `ranks_per_node`) and each platform's own; the loader rejects two that
disagree, and `JobSpec.per_node` reads them as ranks and GPUs.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Generic, Literal, TypeVar, cast

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    create_model,
    field_validator,
    model_serializer,
    model_validator,
)

from anylaunch.backends import registry
from anylaunch.backends.registry import names as backend_names
from anylaunch.backends.section import PerNode, per_node
from anylaunch.jobfile import shellwords
from anylaunch.jobfile.envvars import EnvVars
from anylaunch.jobfile.limits import check_command
from anylaunch.jobfile.mounts import Mount
from anylaunch.jobfile.retry import RetryPolicy
from anylaunch.jobfile.secrets import is_secret_name, masked_env
from anylaunch.jobfile.yamlsrc import on_key
from anylaunch.storage.uri import parse_s3, validate_location

S3Location = Annotated[str, AfterValidator(lambda uri: str(parse_s3(uri)) and uri)]
Launcher = Literal["torchrun", "srun", "none"]
MAX_NAME = 200

if TYPE_CHECKING:
    from anylaunch.backends.lepton.config import LeptonSection
    from anylaunch.backends.local.config import LocalSection
    from anylaunch.backends.skypilot.config import SkyPilotSection
    from anylaunch.backends.slurm.config import SlurmSection


_Section = TypeVar("_Section", bound=BaseModel)


class _BuiltinSection(Generic[_Section]):
    """`spec.slurm` and the like: the job's section for the backend of that name, typed."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.backend = name

    def __get__(self, spec: JobSpec, owner: type | None = None) -> _Section | None:
        return cast("_Section | None", spec.section(self.backend))


def section_model(backend: str) -> type[BaseModel] | None:
    """The pydantic model of a backend's section (`slurm:` -> SlurmSection), which the
    backend declares in its own folder (`Backend.section`); None if it has none."""
    section = getattr(registry.load(backend), "section", None)
    return cast("type[BaseModel] | None", section)


@functools.cache
def _holder(backend: str, model: type[BaseModel] | None) -> type[BaseModel]:
    """A model with the one field `<backend>`: validating a section through it keeps the
    locations of its errors (`slurm.partition`), as a field of JobSpec's would."""
    kind: Any = model if model is not None else Annotated[Any, AfterValidator(_no_section(backend))]
    fields: dict[str, Any] = {backend: (kind, ...)}
    return create_model(f"{backend}_section", **fields)


def _no_section(backend: str) -> Any:
    def refuse(value: Any) -> Any:
        raise ValueError(
            f"the {backend} backend has no section of its own;"
            f" remove '{backend}:' and write its settings as top-level keys (nodes, env ...)"
        )

    return refuse


class Strict(BaseModel):
    """Launcher-owned mappings reject unknown keys: a typo must not be ignored."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Input(Strict):
    """An input: an s3:// URI (object or prefix) or a local path, optionally unpacked."""

    uri: str
    unpack: bool = False

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        return {"uri": value} if isinstance(value, str) else value

    @field_validator("uri")
    @classmethod
    def _known_scheme(cls, value: str) -> str:
        return validate_location(value)


class Hooks(Strict):
    """Commands run on each node before and after the training command."""

    pre: list[str] = Field(default_factory=list)
    post: list[str] = Field(default_factory=list)

    @field_validator("pre", "post", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        value = [value] if isinstance(value, str) else value
        if isinstance(value, list):
            check_command_text([v for v in value if isinstance(v, str)])
        return value


def check_command_text(words: list[str]) -> None:
    """A command's words: within the length limit, and no NUL byte (no program argument
    can hold one; the node would fail to start it after the job was stored)."""
    check_command(sum(len(w) for w in words))
    if any("\x00" in w for w in words):
        raise ValueError("holds a NUL byte, which no command can; remove it")


class Checkpoint(BaseModel):
    """Where the training program writes checkpoints, for resume and preflight checks.

    AutoModel recipes own a top-level `checkpoint:` mapping of their own (enabled,
    model_save_format, ...), so unknown keys here are kept for the program, not rejected.
    """

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    dir: str | None = Field(default=None, validation_alias="checkpoint_dir")
    interval_minutes: float | None = Field(default=None, gt=0)


class Profile(Strict):
    """Nsight Systems profiling of the training command."""

    nsys: bool = False
    output_dir: str | None = None
    nsys_args: list[str] = Field(default_factory=list)
    # Profiling is for short diagnostic runs: longer time limits are refused unless forced.
    max_minutes: float = Field(default=30, gt=0)
    force: bool = False

    def enabled(self, spec: JobSpec) -> bool:
        return self.nsys or bool(spec.slurm and spec.slurm.nsys_enabled)


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|)\s*$")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600}


def duration_s(value: Any) -> float:
    """Seconds in a duration: a number of seconds, or a string such as `90s`, `10m`, `1h`."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    match = _DURATION.match(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"{value!r} is not a duration; write seconds (600) or 90s, 10m, 1h")
    return float(match[1]) * _UNIT_S[match[2]]


class Watchdog(Strict):
    """Stop a hung job: when no rank has written output for `idle`, the Python stack of
    every rank goes into the job's log and the job is stopped (diagnosed HANG)."""

    idle: Annotated[float, BeforeValidator(duration_s), Field(gt=0)]


class Snapshot(Strict):
    """`snapshot: true`, or a mapping: the job runs from a copy of its working folder's
    files taken at submit time (git's tracked and untracked-but-not-ignored files), so
    edits made while it waits change nothing it reads. The default of a remote Slurm
    cluster, which cannot see this machine's folders; opt-in elsewhere."""

    enabled: bool = True
    max_mb: int = Field(default=100, ge=1, description="the most the copy may hold, in MB")

    @model_validator(mode="before")
    @classmethod
    def _from_flag(cls, value: Any) -> Any:
        return {"enabled": value} if isinstance(value, bool) else value


# A reference to an environment variable, the one way a webhook URL is written.
URL_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class NotifyTarget(Strict):
    """Where a job's end is announced: a webhook that takes a Slack incoming webhook's
    JSON, or a shell command that reads the same JSON on its standard input.

    A webhook URL is a bearer secret (whoever has it may post): it is written as the
    reference `${NAME}` and travels like the job's secrets, by name only.
    """

    on: list[Literal["SUCCEEDED", "FAILED", "CANCELLED", "UNKNOWN"]] = Field(min_length=1)
    url: str | None = None
    command: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _on_key(cls, data: Any) -> Any:
        return on_key(data)

    @model_validator(mode="after")
    def _one_target(self) -> NotifyTarget:
        if (self.url is None) == (self.command is None):
            raise ValueError("give exactly one of url: (a webhook) or command: (a shell line)")
        if self.url is not None and not URL_REFERENCE.fullmatch(self.url):
            raise ValueError(
                "a webhook URL is a secret: write it as url: ${SLACK_WEBHOOK_URL} and export"
                " SLACK_WEBHOOK_URL"
            )
        return self

    @property
    def url_env(self) -> str | None:
        """The environment variable holding the webhook URL."""
        match = URL_REFERENCE.fullmatch(self.url or "")
        return match[1] if match else None


class JobSpec(Strict):
    """What to run. Build one with `anylaunch.load(path)` or directly in Python."""

    name: str | None = None
    # A string is a shell line run by bash on each node; a list runs exactly as given.
    command: str | list[str] = Field(default_factory=list)
    launcher: Launcher = "torchrun"
    nodes: int | None = Field(default=None, ge=1)
    # GPUs asked for on each node, one rank per GPU; ranks without GPUs: ranks_per_node.
    gpus_per_node: int | None = Field(default=None, ge=0)
    ranks_per_node: int | None = Field(default=None, ge=1)
    image: str | None = None
    env: EnvVars = Field(default_factory=dict)
    inputs: dict[str, Input] = Field(default_factory=dict)
    outputs: dict[str, S3Location] = Field(default_factory=dict)
    mounts: list[Mount] = Field(default_factory=list)
    hooks: Hooks = Field(default_factory=Hooks)
    checkpoint: Checkpoint | None = None
    profile: Profile | None = None
    watchdog: Watchdog | None = None
    notify: list[NotifyTarget] = Field(default_factory=list)
    # A run of parallel splits: a count, or one value per split (each split's SPLIT_ID).
    splits: int | list[str | int | float | bool] | None = None
    # Run from a copy of the working folder taken at submit; None: the backend's default.
    snapshot: Snapshot | None = None
    # When a failed attempt is followed by another (`jobfile/retry.py`).
    retry: RetryPolicy | None = None

    # Keys the launcher does not own (model, data, step_scheduler, ...), for the program.
    # Keys keep YAML's types (`0:` stays an int, `on:` a bool): the program reads them back.
    recipe: dict[Any, Any] = Field(default_factory=dict)
    # The job file this spec came from; relative paths and `{config}` resolve against it.
    source: str | None = None

    # Each backend's own section (`slurm:`, `lepton:`, a registered backend's), by the
    # backend's name, validated by the model the backend declares (`Backend.section`).
    # Only a job file's own sections are built: a job without `skypilot:` never imports
    # SkyPilot's model. Written back under their names by `model_dump`.
    _sections: dict[str, BaseModel] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _backend_sections(cls, data: Any, handler: ModelWrapValidatorHandler[JobSpec]) -> JobSpec:
        if not isinstance(data, dict):
            return handler(data)
        backends = set(backend_names())
        spec = handler({k: v for k, v in data.items() if k not in backends})
        written = {k: v for k, v in data.items() if k in backends and v is not None}
        spec._sections = {
            name: getattr(_holder(name, section_model(name)).model_validate({name: value}), name)
            for name, value in written.items()
        }
        return spec

    @model_serializer(mode="wrap")
    def _with_sections(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> Any:
        data = handler(self)
        for name, section in self._sections.items():
            data[name] = section.model_dump(
                mode=info.mode, by_alias=info.by_alias, exclude_none=info.exclude_none
            )
        return data

    def section(self, backend: str) -> BaseModel | None:
        """The job file's section for `backend` (its own model), None if it has none."""
        return self._sections.get(backend)

    def with_section(self, backend: str, section: BaseModel) -> JobSpec:
        """A copy of this spec whose `backend` section is `section`."""
        copy = self.model_copy()
        copy._sections = {**self._sections, backend: section}
        return copy

    # The sections of the backends this version ships, typed, for the code that reads
    # them (a registered backend reads its own with `section`).
    local: ClassVar[_BuiltinSection[LocalSection]] = _BuiltinSection()
    slurm: ClassVar[_BuiltinSection[SlurmSection]] = _BuiltinSection()
    skypilot: ClassVar[_BuiltinSection[SkyPilotSection]] = _BuiltinSection()
    lepton: ClassVar[_BuiltinSection[LeptonSection]] = _BuiltinSection()

    @field_validator("name")
    @classmethod
    def _printable_name(cls, value: str | None) -> str | None:
        # A name is a line in `ps`, a Slurm --job-name, a Lepton name: one line of text.
        if value is not None and any(ord(c) < 32 or ord(c) == 127 for c in value):
            raise ValueError(
                f"{value[:40]!r} holds a control character (a newline, a tab, a NUL);"
                " write the name on one line of plain text"
            )
        if value is not None and len(value) > MAX_NAME:
            raise ValueError(f"is {len(value)} characters; use at most {MAX_NAME}")
        return value

    @field_validator("gpus_per_node")
    @classmethod
    def _some_gpus(cls, value: int | None) -> int | None:
        if value == 0:
            raise ValueError(
                "0 GPUs start no rank; for ranks without GPUs write ranks_per_node: N"
                " instead of gpus_per_node"
            )
        return value

    @field_validator("ranks_per_node")
    @classmethod
    def _ranks_or_gpus(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and info.data.get("gpus_per_node"):
            raise ValueError(
                "is for ranks without GPUs, and gpus_per_node already starts one rank per"
                " GPU; keep gpus_per_node for GPU ranks, or ranks_per_node alone for CPU ranks"
            )
        return value

    @field_validator("command", mode="before")
    @classmethod
    def _command_forms(cls, value: Any) -> Any:
        # Bounded before reading, and read in linear time (shlex is quadratic per word).
        if isinstance(value, str):
            check_command_text([value])
        elif isinstance(value, list):
            check_command_text([v for v in value if isinstance(v, str)])
        if isinstance(value, str):
            try:  # bash would refuse it on the node: say so at load
                shellwords.split(value, comments=True)
            except ValueError as exc:
                raise ValueError(f"cannot read the command as a shell line: {exc}") from None
            return value.strip()
        if isinstance(value, list):  # YAML reads `[true, 1]` as a bool and a number
            return [
                str(v).lower()
                if isinstance(v, bool)
                else str(v)
                if isinstance(v, int | float)
                else v
                for v in value
            ]
        return value

    def s3_uris(self) -> list[str]:
        """Every s3:// URI the job reads or writes."""
        uris = [i.uri for i in self.inputs.values()] + list(self.outputs.values())
        return [u for u in uris if u.startswith("s3://")]

    @field_validator("inputs", "outputs")
    @classmethod
    def _paths_stay_put(cls, value: dict[str, Any]) -> dict[str, Any]:
        # Path safety: a '..' would let staging link or upload outside the job's tree.
        for path in value:
            if ".." in PurePosixPath(path).parts or not path.strip():
                raise ValueError(
                    f"'{path}' climbs out with '..'; write a path inside the job's directory"
                )
        return value

    @field_validator("splits", mode="before")
    @classmethod
    def _some_splits(cls, value: Any) -> Any:
        counts = isinstance(value, int) and not isinstance(value, bool) and value >= 1
        if value is None or counts or (isinstance(value, list) and value):
            return value
        raise ValueError(
            f"{value!r} is not a count or a list of values; write a number >= 1 or a list"
        )

    def split_values(self) -> list[str | None]:
        """One entry per split: its value (SPLIT_VALUE), or None for a plain count."""
        if self.splits is None:
            return []
        if isinstance(self.splits, int):
            return [None] * self.splits
        return [str(v).lower() if isinstance(v, bool) else str(v) for v in self.splits]

    def sections(self) -> list[str]:
        """Names of the backend sections written in the job file."""
        return list(self._sections)

    def per_node(self, backend: str) -> PerNode:
        """Ranks and GPUs per node on `backend`, from the neutral keys and its section."""
        return per_node(self.gpus_per_node, self.ranks_per_node, self.section(backend))

    def secret_env(self) -> dict[str, str]:
        """Environment entries that must travel as secrets, never in plans or the store:
        secret-looking `env:` entries and every webhook URL of `notify:` (from the
        environment it was loaded in)."""
        secrets = {k: v for k, v in self.env.items() if is_secret_name(k)}
        for target in self.notify:
            if target.url_env and target.url_env in os.environ:
                secrets[target.url_env] = os.environ[target.url_env]
        return secrets

    def public_env(self) -> dict[str, str]:
        return {k: v for k, v in self.env.items() if not is_secret_name(k)}

    def redacted(self) -> dict[str, Any]:
        """The spec as JSON for the store: secret values replaced by `***`."""
        data = self.model_dump(mode="json", exclude_none=True)
        data["env"] = masked_env(self.env)
        return data
