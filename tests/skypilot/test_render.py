"""Rendering SkyPilot tasks: AutoModel's spot example, strict keys, secrets, the SDK boundary.

Every rendered task here goes through the real `skypilot` library; nothing reaches the
network (proxies point at a dead port).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from anylaunch.errors import ConfigError
from anylaunch.jobfile import loader
from conftest import AUTOMODEL_SPOT, OFFLINE, needs_sky

pytestmark = needs_sky


def dry_run(cli_inproc, path: Path, *args: str, env: dict[str, str] | None = None):
    return cli_inproc(
        "run", str(path), "--dry-run", "--json", *args, env={**OFFLINE, **(env or {})}
    )


def test_automodel_spot_example_renders_an_offline_managed_task_with_recovery_and_checkpoint_mount(
    cli_inproc, automodel_spot, tmp_path
):
    result = dry_run(
        cli_inproc,
        automodel_spot,
        env={"HF_TOKEN": "hf_example_token_value", "HOME": str(tmp_path)},
    )
    assert result.rc == 0, result.err
    out = result.json()
    assert out["backend"] == "skypilot"
    payload = out["plan"]["payload"]
    task = payload["task"]
    assert payload["mode"] == "managed"  # spot -> managed job, recovered after preemption
    assert task["num_nodes"] == 2 and task["setup"] == "pip install nemo-automodel"
    resources = task["resources"]
    assert resources["infra"] == "aws/us-east-1"
    assert resources["accelerators"] == "H100:8" and resources["use_spot"] is True
    assert resources["disk_size"] == 200
    assert resources["job_recovery"]["strategy"] == "EAGER_NEXT_REGION"
    mount = task["file_mounts"]["/checkpoints"]  # restore_from.path: /checkpoints/latest
    assert mount["mode"] == "MOUNT" and mount["name"].startswith("anylaunch-ckpt-llm-finetune-")
    assert "--nproc-per-node 8" in task["run"] and "ANYLAUNCH_RESUME_FROM" in task["run"]
    assert task["secrets"] == {"HF_TOKEN": None}
    assert "hf_example_token_value" not in result.out


def test_dry_run_text_is_the_task_yaml_sky_launch_reads(cli_inproc, automodel_spot, sky_home):
    import sky

    result = cli_inproc(
        "run", str(automodel_spot), "--dry-run", env={"HF_TOKEN": "x", "HOME": str(sky_home)}
    )
    assert result.rc == 0, result.err
    head = result.out.split("\n", 1)[0]
    assert head.startswith("# sky jobs launch --name llm-finetune task.yaml")
    text = result.out.split("\n", 2)[2]
    task = sky.Task.from_yaml_config(yaml.safe_load(text))  # the real library reads it back
    assert task.num_nodes == 2 and next(iter(task.resources)).use_spot


def test_misspelt_use_spot_is_an_exit_2_error_naming_the_line_and_use_spot(cli_inproc, write):
    path = write(AUTOMODEL_SPOT.replace("use_spot: true", "use_sopt: false"))
    result = cli_inproc("run", str(path), "--dry-run", env={"HF_TOKEN": "x"})
    assert result.rc == 2
    assert result.err.count("\n") == 1, result.err
    assert f"{path}:7: skypilot.use_sopt: unknown key" in result.err
    assert "did you mean 'use_spot'?" in result.err


def test_unknown_key_in_an_any_of_candidate_names_its_line(write):
    path = write(
        "command: python train.py\nskypilot:\n  cloud: aws\n  any_of:\n"
        "    - cloud: gcp\n      acelerators: A100:8\n"
    )
    with pytest.raises(ConfigError) as err:
        loader.load(path, environ={})
    assert err.value.line == 6 and "did you mean 'accelerators'" in err.value.message


def test_region_without_cloud_is_rejected_before_rendering(write):
    path = write("command: python train.py\nskypilot:\n  region: us-east-1\n")
    with pytest.raises(ConfigError) as err:
        loader.load(path, environ={})
    assert err.value.line == 2 and "need a cloud" in err.value.message


def test_accelerator_count_and_gpus_per_node_that_disagree_name_both_lines(write):
    path = write('command: python t.py\ngpus_per_node: 4\nskypilot:\n  accelerators: "H100:8"\n')
    with pytest.raises(ConfigError) as err:
        loader.load(path, environ={})
    assert err.value.line == 4 and ":2)" in err.value.message


def test_what_skypilot_rejects_is_a_config_error_naming_the_key(cli_inproc, write, sky_home):
    path = write(
        "command: python train.py\nskypilot:\n  cloud: aws\n  file_mounts:\n"
        "    /data:\n      source: s3://bucket/data\n      mode: SOMETIMES\n"
    )
    result = cli_inproc("run", str(path), "--dry-run", env={"HOME": str(sky_home)})
    assert result.rc == 2, result.err
    assert f"{path}:4: skypilot.file_mounts: SkyPilot rejects the task" in result.err
    assert "SOMETIMES" in result.err


def test_secrets_reach_neither_plan_nor_store(cli_inproc, write, sky_home, home):
    path = write(
        "command: python train.py\nenv:\n  WANDB_API_KEY: ${WANDB_API_KEY}\n"
        "skypilot:\n  cloud: kubernetes\n  env_vars:\n    HF_TOKEN: ${HF_TOKEN}\n    MODE: fast\n"
    )
    secrets = {"HF_TOKEN": "hf_do_not_leak", "WANDB_API_KEY": "wandb_do_not_leak"}
    result = cli_inproc(
        "run", str(path), "--dry-run", "--json", env={**secrets, "HOME": str(sky_home)}
    )
    assert result.rc == 0, result.err
    task = result.json()["plan"]["payload"]["task"]
    assert task["secrets"] == {"HF_TOKEN": None, "WANDB_API_KEY": None}
    # The dry-run shows the task that is sent, its attempt number and run key included
    # (the key is the job's id, as W&B's run id unless the user set one).
    key = task["envs"]["ANYLAUNCH_RUN_KEY"]
    assert task["envs"] == {
        "MODE": "fast",
        "ANYLAUNCH_ATTEMPT": "1",
        "ANYLAUNCH_RUN_KEY": key,
        "WANDB_RUN_ID": key,
        "WANDB_RESUME": "allow",
    }
    assert "do_not_leak" not in result.out
    spec = loader.load(path, environ=secrets)
    assert "do_not_leak" not in json.dumps(spec.redacted())


def test_managed_job_handed_to_sky_jobs_launch_passes_skypilot_own_checks(
    automodel_spot, sky_home, home, monkeypatch
):
    """The SDK boundary of the managed path: the sky.Task that submit() hands to
    `sky.jobs.launch`, put through what SkyPilot does with it before and after the
    HTTP request (DAG, admin policy, volumes, the request body, the controller's parse)
    — all real library code. Left out: the POST itself, because offline the jobs
    controller cannot run, and `dag.validate()`, which downloads SkyPilot's accelerator
    catalog."""
    import sky
    from sky.server.requests import payloads, request_names
    from sky.utils import admin_policy_utils, dag_utils, registry

    from anylaunch import api
    from anylaunch.backends.skypilot import sdk

    monkeypatch.setenv("HF_TOKEN", "hf_boundary")
    plan = api.dry_run(loader.load(automodel_spot), "skypilot")
    task = sdk.task(plan.payload["task"], {"HF_TOKEN": "hf_boundary"})
    dag = dag_utils.convert_entrypoint_to_dag(task)
    dag.name = plan.name
    dag, _ = admin_policy_utils.apply(
        dag, request_name=request_names.AdminPolicyRequestName.JOBS_LAUNCH
    )
    dag.resolve_and_validate_volumes()
    assert dag.is_chain()
    body = payloads.JobsLaunchBody(task=dag_utils.dump_dag_to_yaml_str(dag), name=plan.name)
    controller_side = dag_utils.load_chain_dag_from_yaml_str(body.task).tasks[0]
    resources = next(iter(controller_side.resources))
    assert resources.use_spot and str(resources.cloud) == "AWS"
    strategy = resources.job_recovery["strategy"]
    assert strategy.upper() in {k.upper() for k in registry.JOBS_RECOVERY_STRATEGY_REGISTRY}
    mount = controller_side.storage_mounts["/checkpoints"]
    assert mount.mode == sky.StorageMode.MOUNT and mount.name.startswith("anylaunch-ckpt-")
    assert controller_side.secrets["HF_TOKEN"].get_secret_value() == "hf_boundary"
    assert "hf_boundary" not in json.dumps(plan.model_dump(mode="json"))


def test_every_skypilot_status_maps_and_recovering_is_not_terminal():
    from sky.jobs.state import ManagedJobStatus
    from sky.server.requests.requests import RequestStatus
    from sky.skylet.job_lib import JobStatus

    from anylaunch.backends.skypilot import states

    assert {s.value for s in ManagedJobStatus} <= set(states.MANAGED_JOB)
    assert {s.value for s in JobStatus} <= set(states.CLUSTER_JOB)
    assert {s.value for s in RequestStatus} <= set(states.REQUEST)
    assert not states.MANAGED_JOB["RECOVERING"].terminal
    failed = [s for s in ManagedJobStatus if s.is_failed()]
    assert all(states.MANAGED_JOB[s.value].value == "FAILED" for s in failed)
    from anylaunch.observe.diagnose.engine import diagnose_lines

    kinds = {
        diagnose_lines([], events=[states.detail(n)]).code
        for n in ("FAILED_SETUP", "FAILED_NO_RESOURCE", "FAILED_PRECHECKS")
    }
    assert len(kinds) == 3


def test_spot_without_checkpoint_or_with_a_long_interval_warns_in_preflight(write):
    from anylaunch.backends.skypilot.backend import SkyPilotBackend

    backend = SkyPilotBackend()
    bare = loader.load(write("command: python t.py\nskypilot:\n  cloud: aws\n  use_spot: true\n"))
    warned = {c.name: c for c in backend.preflight(bare) if c.status == "warn"}
    assert "checkpoint.dir" in warned["spot_checkpoint"].fix
    assert "spot_checkpoint_interval" in warned
    slow = loader.load(
        write(
            "command: python t.py\ncheckpoint:\n  dir: /ckpt\n  interval_minutes: 90\n"
            "skypilot:\n  cloud: aws\n  use_spot: true\n  max_lost_minutes: 20\n",
            "slow.yaml",
        )
    )
    checks = {c.name: c for c in backend.preflight(slow)}
    assert checks["spot_checkpoint"].status == "ok"
    assert checks["spot_checkpoint_interval"].status == "warn"
    assert "90 min" in checks["spot_checkpoint_interval"].message
    example = loader.load(write(AUTOMODEL_SPOT, "example.yaml"), environ={"HF_TOKEN": "x"})
    assert all(c.status == "ok" for c in backend.preflight(example))


def test_without_the_extra_other_backends_work_and_skypilot_says_how_to_install(
    tmp_path, write, home, spawns
):
    """A Python where `import sky` fails, as on an install without anylaunch[skypilot]."""
    import subprocess

    hide = tmp_path / "nosky"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(
        "import sys\n"
        "class _NoSky:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'sky' or name.startswith('sky.'):\n"
        "            raise ModuleNotFoundError(\"No module named 'sky'\", name='sky')\n"
        "sys.meta_path.insert(0, _NoSky())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(hide), "ANYLAUNCH_HOME": str(home)}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "anylaunch", *args], env=env, capture_output=True, text=True
        )

    assert run("--help").returncode == 0
    local = write("command: python t.py\nlocal:\n  master_port: 29999\n", "local.yaml")
    assert run("run", str(local), "--dry-run").returncode == 0
    sky_job = write("command: python t.py\nskypilot:\n  cloud: aws\n", "sky.yaml")
    result = run("run", str(sky_job), "--dry-run")
    assert result.returncode == 2
    assert "pip install 'anylaunch[skypilot]'" in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr


def test_skypilot_is_imported_only_when_its_backend_runs(spawns):
    import subprocess

    code = (
        "import sys, anylaunch, anylaunch.cli, anylaunch.api, anylaunch.jobfile.loader;"
        "from anylaunch.backends.base import get_backend;"
        "get_backend('skypilot');"
        "print('sky' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr
