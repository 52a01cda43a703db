"""Any job file text or override gives a JobSpec or a one-line ConfigError, never a crash."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from anylaunch.errors import ConfigError
from anylaunch.jobfile import loader

KEYS = [
    "name",
    "command",
    "nodes",
    "gpus_per_node",
    "ranks_per_node",
    "env",
    "slurm",
    "local",
    "skypilot",
    "lepton",
    # the sections' own words for sizes and GPUs, checked against the neutral ones
    "ntasks_per_node",
    "gres",
    "accelerators",
    "gpu_count",
    "mounts",
    "hooks",
    "launcher",
    "x",
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 10**12),
    st.floats(allow_nan=True),
    st.text(alphabet="ab$:{}-_ \\'\"\n#&*!|>[]", max_size=12),
)
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS), inner, max_size=5)
    ),
    max_leaves=12,
)


override_paths = st.lists(
    st.one_of(st.sampled_from(KEYS), st.sampled_from(["0", "1", "pre", "nodes"])),
    min_size=1,
    max_size=4,
)
overrides = st.builds(
    lambda path, value: ".".join(path) + "=" + value,
    override_paths,
    st.text(alphabet="ab1[]{}:, '", max_size=8),
)


def _check(text: str, overrides: list[str]) -> None:
    try:
        loader.from_text(text, file="fuzz.yaml", environ={"A": "1"}, overrides_=overrides)
    except ConfigError as exc:
        assert "\n" not in exc.message and exc.message


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200), st.lists(st.text(max_size=20), max_size=2))
def test_arbitrary_text_never_crashes(text, overrides):
    _check(text, overrides)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.sampled_from(KEYS), documents, max_size=6), st.lists(overrides, max_size=3)
)
def test_arbitrary_structures_and_overrides_never_crash(data, sets):
    import yaml

    _check(yaml.safe_dump(data), sets)
