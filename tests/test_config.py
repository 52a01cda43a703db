"""Job file -> JobSpec: expansion, overrides, pins, routing, recipe pass-through, errors."""

from __future__ import annotations

import pytest
import yaml

from anylaunch.errors import ConfigError
from anylaunch.jobfile import loader
from anylaunch.launch.resolve import resolve, route


def load(path, env=None, overrides=()):
    return loader.load(path, environ=env or {}, overrides_=overrides)


def error_of(path, env=None, overrides=()) -> str:
    with pytest.raises(ConfigError) as caught:
        load(path, env, overrides)
    message = caught.value.message
    assert "\n" not in message
    return message


def test_env_expansion_forms(write):
    path = write(
        """
        command: python train.py --out ${OUT} --lr ${LR:-0.1} --price $$5 --bare $HOME
        env:
          DATA: ${DATA_DIR}/x
          EMPTY: ${NOPE:-}
        """
    )
    spec = load(path, {"OUT": "/o", "DATA_DIR": "/d"})
    # `${VAR}` expands at load time; a bare `$HOME` is left for the node's shell.
    assert spec.command == "python train.py --out /o --lr 0.1 --price $5 --bare $HOME"
    assert spec.env == {"DATA": "/d/x", "EMPTY": ""}


def test_unset_variable_names_file_line_and_key(write):
    path = write(
        """
        name: x
        env:
          HF_TOKEN: ${HF_TOKEN}
        """
    )
    message = error_of(path)
    assert message.startswith(f"{path}:3: env.HF_TOKEN: environment variable HF_TOKEN is not set")
    assert "export HF_TOKEN" in message


def test_misspelt_slurm_key_suggests_the_right_one(write):
    path = write(
        """
        command: python t.py
        slurm:
          nodes: 2
          ntask_per_node: 8
        """
    )
    message = error_of(path)
    assert message.startswith(f"{path}:4: slurm.ntask_per_node: unknown key")
    assert "did you mean 'ntasks_per_node'?" in message


def test_wrong_type_names_line_and_expected_form(write):
    path = write(
        """
        command: python t.py
        nodes: two
        """
    )
    message = error_of(path)
    assert message.startswith(f"{path}:2: nodes:")
    assert "write a number" in message and "two" in message


def test_invalid_yaml_names_the_line(write):
    path = write("command: python t.py\nnodes: [1, 2\nenv: {}\n")
    message = error_of(path)
    assert message.startswith(f"{path}:3: invalid YAML")


def test_missing_file(tmp_path):
    message = error_of(tmp_path / "nope.yaml")
    assert message == f"{tmp_path / 'nope.yaml'}: no such file — check the path of the job file"


def test_duplicate_key_is_an_error(write):
    path = write("nodes: 1\nnodes: 2\n")
    assert error_of(path).startswith(f"{path}:2: nodes: duplicate key (first written on line 1)")


def test_literal_choices_are_listed(write):
    path = write("launcher: mpirun\n")
    message = error_of(path)
    assert message.startswith(f"{path}:1: launcher:") and "torchrun, srun, none" in message


def test_set_overrides_are_typed_like_yaml(write):
    path = write(
        """
        command: python t.py
        slurm:
          nodes: 1
        """
    )
    spec = load(
        path,
        overrides=["slurm.nodes=4", "slurm.nsys_enabled=true", "slurm.time=01:00:00", "name=x"],
    )
    assert spec.slurm.nodes == 4 and spec.slurm.nsys_enabled is True
    assert spec.slurm.time == "01:00:00" and spec.name == "x"


def test_set_with_a_bad_value_is_reported_as_set(write):
    path = write("command: python t.py\n")
    message = error_of(path, overrides=["nodes=lots"])
    assert message.startswith("--set: nodes:")


def test_set_without_equals(write):
    path = write("command: python t.py\n")
    assert "is not KEY=VALUE" in error_of(path, overrides=["nodes"])


def test_routing(write):
    none = load(write("command: a\n", "a.yaml"))
    assert route(none) == "local"
    one = load(write("command: a\nslurm: {nodes: 1}\n", "b.yaml"))
    assert route(one) == "slurm"
    assert route(one, "local") == "local"
    two = load(write("command: a\nslurm: {}\nlepton: {}\n", "c.yaml"))
    with pytest.raises(ConfigError, match="several backends"):
        route(two)
    assert route(two, "lepton") == "lepton"
    with pytest.raises(ConfigError, match=r"unknown backend 'slrum'.*did you mean 'slurm'"):
        route(two, "slrum")


def test_sizes_in_two_places_that_disagree(write):
    path = write(
        """
        command: python t.py
        nodes: 2
        slurm:
          nodes: 4
        """
    )
    message = error_of(path)
    assert message.startswith(f"{path}:4: slurm.nodes: 4 disagrees with nodes: 2 ({path}:2)")


def test_pins_resolve_and_missing_pin_lists_known_keys(write):
    write("nemo: nvcr.io/nvidia/nemo:25.09\nimages:\n  torch: pytorch:2.13\n", "versions.yaml")
    spec = load(write("image: ${pin:images.torch}\ncommand: a\n"))
    assert spec.image == "pytorch:2.13"
    path = write("image: ${pin:nemoo}\n", "bad.yaml")
    message = error_of(path)
    assert message.startswith(f"{path}:1: image: pin 'nemoo' is not in")
    assert "images.torch, nemo" in message


def test_pins_file_from_environment(write, tmp_path):
    pins = tmp_path / "elsewhere.yaml"
    pins.write_text("img: a/b:1\n")
    spec = load(write("image: ${pin:img}\n"), {"ANYLAUNCH_VERSIONS": str(pins)})
    assert spec.image == "a/b:1"


def test_recipe_keys_pass_through_and_secrets_stay_references(write):
    path = write(
        """
        recipe: TrainFinetuneRecipeForNextTokenPrediction
        step_scheduler:
          checkpoint_interval: 100
        restore_from:
          path: /checkpoints/latest
        checkpoint:
          enabled: true
          checkpoint_dir: /ckpt
        model:
          token: ${HF_TOKEN}
          path: ${MODEL_DIR}
        slurm:
          job_name: llm_finetune
          nodes: 2
          ntasks_per_node: 8
          time: "04:00:00"
          env_vars:
            HF_TOKEN: "${HF_TOKEN}"
        """
    )
    spec = load(path, {"HF_TOKEN": "hf_secret_value", "MODEL_DIR": "/m"})
    assert spec.recipe["step_scheduler"] == {"checkpoint_interval": 100}
    assert spec.recipe["model"] == {"token": "${HF_TOKEN}", "path": "/m"}
    assert spec.recipe["checkpoint"]["enabled"] is True and "slurm" not in spec.recipe
    assert spec.checkpoint.dir == "/ckpt"
    assert spec.slurm.env_vars["HF_TOKEN"] == "hf_secret_value"  # in memory only
    assert "hf_secret_value" not in yaml.safe_dump(spec.recipe)


def test_top_level_lookalike_of_a_launcher_key_is_a_preflight_warning(write):
    from anylaunch.launch import preflight

    spec = load(write("command: python t.py\noutput: {path: out.png}\n"))
    assert spec.recipe["output"] == {"path": "out.png"}  # a valid recipe key: kept
    warned = [c for c in preflight.run(resolve(spec, "local")) if c.name == "recipe_keys"]
    assert [c.status for c in warned] == ["warn"]
    assert "'output'" in warned[0].message and "'outputs'" in warned[0].fix


def test_nemo_run_section_is_refused_with_the_alternative(write):
    path = write("command: python t.py\nnemo_run:\n  executor: slurm\n")
    message = error_of(path)
    assert message.startswith(f"{path}:2: nemo_run: ")
    assert "slurm: or skypilot:" in message


def test_program_references_are_left_for_the_program(write):
    spec = load(
        write(
            "command: python t.py\n"
            "wandb: {project: '${oc.env:WANDB_PROJECT,my-proj}', name: '${model.name}'}\n"
            "x: '${VAR,default} and ${NAME:-d} and $${LIT}'\n"
        )
    )
    assert spec.recipe["wandb"] == {
        "project": "${oc.env:WANDB_PROJECT,my-proj}",
        "name": "${model.name}",
    }
    assert spec.recipe["x"] == "${VAR,default} and d and ${LIT}"


def test_mount_shorthands(write):
    spec = load(write("mounts: ['/data:/data:ro', '/scratch', {source: /a, dest: /b}]\n"))
    assert [(m.source, m.dest, m.readonly) for m in spec.mounts] == [
        ("/data", "/data", True),
        ("/scratch", "/scratch", False),
        ("/a", "/b", False),
    ]


def test_secrets_are_masked_in_the_stored_spec(write):
    spec = load(write("env:\n  WANDB_API_KEY: abcd1234\n  LR: 0.1\n"))
    assert spec.redacted()["env"] == {"WANDB_API_KEY": "***", "LR": "0.1"}
    assert spec.secret_env() == {"WANDB_API_KEY": "abcd1234"}


def test_merge_key_with_an_override_reads_like_pyyaml(write):
    text = "command: t\ndefaults: &d {lr: 1, wd: 0.1}\noptim:\n  <<: *d\n  lr: 2\n"
    spec = load(write(text))
    assert spec.recipe["optim"] == yaml.safe_load(text)["optim"] == {"lr": 2, "wd": 0.1}
    assert list(spec.recipe["optim"]) == list(yaml.safe_load(text)["optim"])
    assert "duplicate key" in error_of(write("command: t\noptim: {<<: {lr: 1}, a: 1, a: 2}\n"))


def test_a_long_list_loads_and_an_alias_bomb_is_named_as_one(write):
    spec = load(write("command: t\nweights: [" + ", ".join(["1"] * 150_000) + "]\n"))
    assert len(spec.recipe["weights"]) == 150_000
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcde", "bcdef", strict=True)
    )
    assert "aliases expand to more than" in error_of(write(bomb))


def test_recipe_keys_keep_their_yaml_types(write):
    spec = load(write("command: t\n0: zero\non: {push: 1}\n1.5: x\nlabels: {0: a, 1: b}\n"))
    text = yaml.safe_dump(spec.recipe, sort_keys=False)
    assert yaml.safe_load(text) == {
        0: "zero",
        True: {"push": 1},
        1.5: "x",
        "labels": {0: "a", 1: "b"},
    }
    over = load(
        write("command: t\nlabels: {0: a}\non: {push: 1}\n"), overrides=["labels.0=z", "on.push=2"]
    )
    assert over.recipe == {"labels": {0: "z"}, True: {"push": 2}}


def test_set_on_a_secret_reference_is_applied_or_refused_never_dropped(write):
    path = write("command: t\nmodel: {token: '${HF_TOKEN}'}\n")
    env = {"HF_TOKEN": "hf_one", "MY_TOKEN": "hf_two"}
    spec = load(path, env, overrides=["model.token=${MY_TOKEN}"])
    assert spec.recipe["model"]["token"] == "${MY_TOKEN}"
    assert spec.env["MY_TOKEN"] == "hf_two"  # travels as a secret, not in the recipe
    message = error_of(path, env, overrides=["model.token=hf_plain"])
    assert "model.token: holds a secret reference" in message and "hf_plain" not in message


def test_secrets_named_in_the_recipe_body_travel_with_the_job(write):
    path = write(
        "command: t\nwandb: {key: '${WANDB_API_KEY}', p: '${oc.env:MY_SECRET,x}'}\nenv: {A: '1'}\n"
    )
    spec = load(path, {"WANDB_API_KEY": "wk", "MY_SECRET": "ms", "UNUSED_TOKEN": "u"})
    assert spec.recipe["wandb"] == {"key": "${WANDB_API_KEY}", "p": "${oc.env:MY_SECRET,x}"}
    assert spec.secret_env() == {"WANDB_API_KEY": "wk", "MY_SECRET": "ms"}
    assert "wk" not in yaml.safe_dump(spec.redacted())


def test_an_alias_inside_its_own_value_is_a_one_line_error(write):
    assert "an alias refers to the value that contains it" in error_of(write("a: &a [*a]\n"))


def test_a_command_inside_a_backend_section_points_to_the_top_level(write):
    message = error_of(write("slurm:\n  command: python t.py\n"))
    assert "slurm.command: the command is not a section key" in message
    assert "top-level 'command:'" in message
