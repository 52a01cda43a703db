"""The `slurm:` section and the sbatch script it renders — pure, no cluster needed."""

from __future__ import annotations

import re
import shlex
import subprocess

import pytest

from anylaunch import api
from anylaunch.backends.slurm import preflight, states
from anylaunch.backends.slurm.backend import SlurmBackend
from anylaunch.backends.slurm.plan import describe
from anylaunch.backends.slurm.script import pyxis_image
from anylaunch.errors import ConfigError
from anylaunch.jobfile import loader
from anylaunch.state import State
from anylaunch.store import Store
from automodel_docs import SLURM_BLOCK

# AutoModel's minimal Slurm template for a multi-node fine-tune, as its users write it.
AUTOMODEL_SLURM = (
    "name: llm\n"
    "command: python -m nemo_automodel.recipes.llm.finetune -c {config}\n"
    "model:\n"
    "  pretrained_model_name_or_path: meta-llama/Llama-3.2-1B\n" + SLURM_BLOCK
)
EXAMPLE_SECRETS = {"HF_TOKEN": "hf_example_secret", "WANDB_API_KEY": "wandb_example_secret"}


def spec_of(text: str, env: dict[str, str] | None = None, file: str = "/jobs/job.yaml"):
    return loader.from_text(text, file=file, environ=env or {})


def render(tmp_path, text: str, env: dict[str, str] | None = None):
    return api.dry_run(spec_of(text, env), "slurm", store=Store(tmp_path / "home"))


def script_of(tmp_path, text: str, env: dict[str, str] | None = None) -> str:
    return render(tmp_path, text, env).payload["script"]


def task_part(script: str) -> str:
    """The heredoc that every task runs (between `<<'TAG'` and TAG)."""
    tag = re.search(r"ANYLAUNCH_TASK <<'(\w+)'", script).group(1)
    return script.split(f"<<'{tag}' || true\n", 1)[1].split(f"\n{tag}\n", 1)[0]


def config_error(text: str, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        spec_of(text, env)
    assert "\n" not in caught.value.message
    return caught.value.message


def test_automodel_slurm_yaml_dry_run_shows_its_fields_without_touching_a_cluster(
    cli_inproc, write, home
):
    path = write(AUTOMODEL_SLURM)
    # No cluster behind this SLURM_CONF: any Slurm command would fail the dry run.
    result = cli_inproc(
        "run", str(path), "--dry-run", env={**EXAMPLE_SECRETS, "SLURM_CONF": "/nope"}
    )
    assert result.rc == 0, result.err
    script = result.out
    for line in (
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=8",
        "#SBATCH --time=04:00:00",
        "#SBATCH --account=my_account",
        "#SBATCH --partition=batch",
        "export MASTER_PORT=13742",
        "export WORLD_SIZE=16",
        'export HF_HOME="$HOME"/.cache/huggingface',
    ):
        assert line in script.splitlines(), line
    assert "'--container-image=nvcr.io#nvidia/nemo:dev'" in script
    assert "--container-mounts=/data:/data," in script
    assert all(secret not in script for secret in EXAMPLE_SECRETS.values())
    assert "HF_TOKEN" in script and "WANDB_API_KEY" in script
    assert not (home / "jobs").exists()  # nothing written, nothing submitted
    as_json = cli_inproc("run", str(path), "--dry-run", "--json", env=EXAMPLE_SECRETS)
    payload = as_json.json()["plan"]["payload"]
    assert (payload["nodes"], payload["ntasks_per_node"], payload["world_size"]) == (2, 8, 16)
    assert all(secret not in as_json.out for secret in EXAMPLE_SECRETS.values())


@pytest.mark.parametrize("launcher", ["torchrun", "srun", "none"])
def test_script_is_valid_bash_in_every_launcher_mode(tmp_path, launcher):
    script = script_of(
        tmp_path,
        f"""
        command: python train.py --lr 0.1
        launcher: {launcher}
        nodes: 2
        gpus_per_node: 4
        hooks:
          pre: echo pre
          post: echo post
        profile:
          nsys: true
        slurm:
          time: "1-00:00:00"
          extra_mounts: ["/a:/b:ro", /c]
          container_image: ubuntu:22.04
        """.replace("\n        ", "\n"),
    )
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    task = task_part(script)
    assert subprocess.run(["bash", "-n"], input=task, text=True).returncode == 0
    assert 'nsys profile -o "$ANYLAUNCH_JOB_DIR"/nsys/"$ANYLAUNCH_JOB_ID"-"$SLURM_NODEID"' in task


def test_node_rank_is_derived_inside_each_task_not_in_the_batch_shell(tmp_path):
    script = script_of(tmp_path, "command: python t.py\nnodes: 2\n")
    task = task_part(script)
    assert 'export NODE_RANK="$SLURM_NODEID"' in task
    assert '--node-rank "$NODE_RANK"' in task
    batch_only = script.replace(task, "")
    assert "NODE_RANK" not in batch_only
    assert (
        'MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"' in batch_only
    )


def test_srun_mode_runs_one_task_per_rank_with_slurm_ranks(tmp_path):
    text = "command: python t.py\nlauncher: srun\nslurm:\n  nodes: 2\n  ntasks_per_node: 3\n"
    script = script_of(tmp_path, text)
    task = task_part(script)
    assert 'export RANK="$SLURM_PROCID" LOCAL_RANK="$SLURM_LOCALID"' in task
    assert "srun --ntasks-per-node=3 --kill-on-bad-exit=1" in script
    assert "export WORLD_SIZE=6" in script and "torchrun" not in script


def test_none_mode_sets_world_size_to_the_node_count(tmp_path):
    script = script_of(tmp_path, "command: ./run.sh\nlauncher: none\nnodes: 3\ngpus_per_node: 8\n")
    assert "export WORLD_SIZE=3" in script and "export NUM_GPU_PER_NODE=8" in script
    # A string command is a shell line that bash runs on the node.
    assert '\n./run.sh\nANYLAUNCH_CMD\nexec bash -c "$ANYLAUNCH_COMMAND"' in task_part(script)


def test_secrets_are_named_for_sbatch_export_never_written(tmp_path):
    text = """
        command: python t.py
        env:
          HF_TOKEN: ${HF_TOKEN}
          PLAIN: visible
        slurm:
          env_vars:
            WANDB_API_KEY: ${WANDB_API_KEY}
            OTHER: also-visible
        """
    env = {"HF_TOKEN": "hf_planted_value", "WANDB_API_KEY": "wandb_planted_value"}
    plan = render(tmp_path, text, env)
    dumped = plan.model_dump_json() + describe(plan)
    assert "hf_planted_value" not in dumped and "wandb_planted_value" not in dumped
    assert "--export=ALL,HF_TOKEN,WANDB_API_KEY" in describe(plan)
    assert "export PLAIN=visible" in plan.payload["script"]
    assert "export OTHER=also-visible" in plan.payload["script"]
    stored = str(spec_of(text, env).redacted())
    assert "wandb_planted_value" not in stored and "hf_planted_value" not in stored


def test_user_values_are_shell_quoted(tmp_path):
    hostile = "x'; touch /tmp/pwned #"
    text = f"""
        name: "{hostile}"
        command: ["python", "t.py", "{hostile}", "$HOME"]
        env:
          NOTE: "{hostile}"
        slurm:
          extra_mounts: ["/data dir:/d"]
        """
    script = script_of(tmp_path, text)
    assert "#SBATCH --job-name='x'\"'\"'; touch /tmp/pwned #'" in script
    assert "export NOTE='x'\"'\"'; touch /tmp/pwned #'" in script
    assert "t.py 'x'\"'\"'; touch /tmp/pwned #' '$HOME'" in task_part(script)
    # Running the environment part in bash gives back the literal values.
    exports = "\n".join(line for line in script.splitlines() if line.startswith("export NOTE"))
    out = subprocess.run(
        ["bash", "-c", exports + '\nprintf %s "$NOTE"'], capture_output=True, text=True
    )
    assert out.stdout == hostile


def test_environment_names_that_are_not_identifiers_are_config_errors(tmp_path):
    with pytest.raises(ConfigError) as caught:
        render(tmp_path, 'command: t\nenv:\n  "A;rm -rf ~": x\n')
    assert "env.A;rm -rf ~" in caught.value.message
    assert "not an environment variable name" in caught.value.message  # refused at load


@pytest.mark.parametrize(
    ("image", "pyxis"),
    [
        ("nvcr.io/nvidia/nemo:dev", "nvcr.io#nvidia/nemo:dev"),
        ("nvcr.io#nvidia/nemo:dev", "nvcr.io#nvidia/nemo:dev"),
        ("ghcr.io/org/img:1", "ghcr.io#org/img:1"),
        ("localhost:5000/img", "localhost:5000#img"),
        ("ubuntu:22.04", "ubuntu:22.04"),
        ("library/ubuntu", "library/ubuntu"),
        ("/images/nemo.sqsh", "/images/nemo.sqsh"),
    ],
)
def test_images_are_written_in_pyxis_form(image, pyxis):
    assert pyxis_image(image) == pyxis


def test_time_limit_brings_early_signal_deadline_and_requeue(tmp_path):
    script = script_of(tmp_path, 'command: t\nslurm:\n  time: "02:00:00"\n  signal_lead: "05:00"\n')
    assert "#SBATCH --signal=B:USR1@300" in script and "#SBATCH --requeue" in script
    assert "export ANYLAUNCH_DEADLINE=$(( $(date +%s) + 7200 ))" in script
    # The ranks start with USR1 as the default (a framework may install its handler); the
    # batch shell passes it on to those that handle it, never to the whole step.
    task = task_part(script)
    assert "trap" not in task and "export ANYLAUNCH_IN_STEP=1" in task
    assert "trap forward_signal USR1" in script and 'kill -USR1 "$srun_pid"' not in script
    assert re.search(
        r"srun --overlap .*anylaunch_job.pyz\" signal \"\$ANYLAUNCH_JOB_ID\" USR1", script
    )
    untimed = script_of(tmp_path, "command: t\nslurm:\n  requeue: false\n")
    assert "--signal" not in untimed and "ANYLAUNCH_DEADLINE" not in untimed
    assert "#SBATCH --no-requeue" in untimed


def test_unquoted_yaml_time_is_read_as_the_same_limit(tmp_path):
    # YAML 1.1 reads 04:00:00 as the number 14400.
    spec = spec_of("command: t\nslurm:\n  time: 04:00:00\n")
    assert spec.slurm.time == "04:00:00"


def test_resource_fields_become_sbatch_options(tmp_path):
    script = script_of(
        tmp_path,
        """
        command: t
        slurm:
          gres: "gpu:h100:8,nvme:1"
          cpus_per_task: 4
          mem: 64G
          exclusive: true
          constraint: h100
          qos: high
          reservation: res1
          dependency: afterok:42
          sbatch_lines: ["--mail-type=END", "#SBATCH --mail-user=a@b.c"]
        """,
    )
    for option in (
        "--gres=gpu:h100:8,nvme:1",
        "--ntasks-per-node=8",
        "--cpus-per-task=4",
        "--mem=64G",
        "--exclusive",
        "--constraint=h100",
        "--qos=high",
        "--reservation=res1",
        "--dependency=afterok:42",
        "--mail-type=END",
        "--mail-user=a@b.c",
    ):
        assert f"#SBATCH {option}" in script.splitlines(), option


def test_config_placeholder_points_at_the_recipe_in_the_job_dir(tmp_path):
    plan = render(tmp_path, AUTOMODEL_SLURM, EXAMPLE_SECRETS)
    assert "recipe.yaml" in plan.files and "model:" in plan.files["recipe.yaml"]
    assert '-c "$ANYLAUNCH_JOB_DIR"/recipe.yaml' in task_part(plan.payload["script"])


def test_splits_render_as_one_array_with_a_job_per_task(tmp_path):
    spec = spec_of("command: t\nslurm:\n  array_parallelism: 2\n")
    backend = SlurmBackend()
    store = Store(tmp_path / "home")
    contexts = [
        (i, backend.prepare(spec, f"job{i}", str(tmp_path / f"job{i}"), store, reserve=False))
        for i in (0, 1, 5)
    ]
    script = backend.plan_array(spec, contexts).payload["script"]
    assert "#SBATCH --array=0,1,5%2" in script
    assert (
        f"  5) ANYLAUNCH_JOB_ID=job5 ANYLAUNCH_JOB_DIR={tmp_path}/job5 ANYLAUNCH_ATTEMPT=1 ;;"
        in script
    )
    assert 'export SPLIT_ID="$SLURM_ARRAY_TASK_ID"' in script


def test_user_template_places_the_parts(tmp_path, write):
    write("#!/bin/bash\n{{ sbatch }}\nmodule load cuda\n{{ setup }}\n{{launch}}\n", "site.sh")
    path = write("command: t\nslurm:\n  template: site.sh\n")
    spec = loader.load(path, environ={})
    script = api.dry_run(spec, "slurm", store=Store(tmp_path / "home")).payload["script"]
    assert script.index("#SBATCH --nodes=1") < script.index("module load cuda")
    assert script.index("module load cuda") < script.index("export MASTER_PORT")


def test_user_template_with_an_unknown_slot_names_its_line(tmp_path, write):
    write("#!/bin/bash\n{{ sbatch }}\n{{ lanch }}\n", "site.sh")
    path = write("command: t\nslurm:\n  template: site.sh\n")
    with pytest.raises(ConfigError) as caught:
        api.dry_run(loader.load(path, environ={}), "slurm", store=Store(tmp_path / "home"))
    assert "site.sh:3: slurm.template: unknown slot '{{ lanch }}'" in caught.value.message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("slurm:\n  ntask_per_node: 2\n", "job.yaml:2: slurm.ntask_per_node: unknown key"),
        ('slurm:\n  time: "4h"\n', "job.yaml:2: slurm.time: '4h' is not HH:MM:SS or D-HH:MM:SS"),
        (
            'slurm:\n  extra_mounts: ["a:b:c:d"]\n',
            "job.yaml:2: slurm.extra_mounts[0]: 'a:b:c:d' is not a mount",
        ),
        ("slurm:\n  signal: KILL\n", "job.yaml:2: slurm.signal: 'KILL' is not one of"),
        ("slurm:\n  mem: lots\n", "job.yaml:2: slurm.mem: 'lots' is not a size"),
        ("slurm:\n  master_port: 70000\n", "job.yaml:2: slurm.master_port:"),
        ("slurm:\n  sbatch_lines: [mail]\n", "job.yaml:2: slurm.sbatch_lines:"),
    ],
)
def test_bad_section_values_are_one_line_errors_with_file_line_and_key(text, expected):
    message = config_error("command: t\n" + text)
    assert message.startswith(expected.replace("job.yaml:2", "/jobs/job.yaml:3")), message


def test_unknown_section_key_suggests_the_right_one():
    message = config_error("command: t\nslurm:\n  ntask_per_node: 2\n")
    assert "did you mean 'ntasks_per_node'" in message


def test_mounts_accept_strings_and_mappings():
    spec = spec_of(
        "command: t\nslurm:\n  nemo_mount: /src:/opt/nemo\n  extra_mounts:\n"
        "    - /data:/data:ro\n    - /scratch\n    - {source: /a, dest: /b}\n"
    )
    mounts = [(m.source, m.dest, m.readonly) for m in spec.slurm.extra_mounts]
    assert mounts == [
        ("/data", "/data", True),
        ("/scratch", "/scratch", False),
        ("/a", "/b", False),
    ]
    assert (spec.slurm.nemo_mount.source, spec.slurm.nemo_mount.dest) == ("/src", "/opt/nemo")


@pytest.mark.parametrize(
    ("code", "requeue", "state"),
    [
        ("PD", True, State.PENDING),
        ("CF", True, State.STARTING),
        ("R", True, State.RUNNING),
        ("CG", True, State.RUNNING),
        ("CD", True, State.SUCCEEDED),
        ("F", True, State.FAILED),
        ("TO", True, State.TIMEOUT),
        ("PR", True, State.PENDING),  # Slurm requeues it: not final
        ("PR", False, State.PREEMPTED),
        ("NF", True, State.PENDING),
        ("NF", False, State.FAILED),
        ("OOM", True, State.FAILED),
        ("CA", True, State.CANCELLED),
        ("CANCELLED by 0", True, State.CANCELLED),
        ("BF", True, State.FAILED),
        ("DL", True, State.TIMEOUT),
        ("RQ", True, State.PENDING),
        ("S", True, State.RUNNING),
        ("WHATEVER", True, State.UNKNOWN),
    ],
)
def test_every_slurm_state_maps_onto_ours(code, requeue, state):
    assert states.to_state(code, requeue=requeue) is state


def test_exit_codes_read_from_squeue_and_sacct():
    assert states.from_wait_status(768) == 3 and states.from_wait_status(9) == 137
    assert states.from_exit_pair("3:0") == 3 and states.from_exit_pair("0:9") == 137


def test_preflight_warns_when_the_signal_lead_is_shorter_than_a_checkpoint_write():
    spec = spec_of(
        'command: t\nslurm:\n  time: "04:00:00"\n  signal_lead: 120\n  checkpoint_write_time: 300\n'
    )
    checks = {c.name: c for c in preflight.spec_checks(spec)}
    assert checks["checkpoint_before_kill"].status == "warn"
    assert "signal_lead" in checks["checkpoint_before_kill"].fix
    fine = spec_of('command: t\nslurm:\n  time: "04:00:00"\n  checkpoint_write_time: 300\n')
    assert {c.status for c in preflight.spec_checks(fine)} == {"ok"}


def test_backend_preflight_without_deep_asks_no_cluster():
    from anylaunch.backends.slurm import commands

    spec = spec_of('command: t\nslurm:\n  time: "00:20:00"\n  signal: null\n')
    before = commands.CALLS.copy()
    checks = SlurmBackend().preflight(spec)
    assert sum((commands.CALLS - before).values()) == 0
    assert [(c.name, c.status) for c in checks] == [("time_limit_signal", "warn")]


def test_status_lists_the_nsys_reports_a_profiled_job_wrote(cli_inproc, write, home):
    from anylaunch.state import State as S
    from anylaunch.store import JobRecord

    path = write("command: python t.py\nslurm:\n  nsys_enabled: true\n  nodes: 2\n")
    store = Store(home)
    plan = api.dry_run(loader.load(path, environ={}), "slurm", store=store)
    job_dir = home / "jobs" / plan.job_id
    (job_dir / "nsys").mkdir(parents=True)
    for node in (0, 1):
        (job_dir / "nsys" / f"{plan.job_id}-{node}.nsys-rep").write_bytes(b"rep")
    store.add(
        JobRecord(
            id=plan.job_id,
            name="p",
            backend="slurm",
            state=S.SUCCEEDED,
            job_dir=str(job_dir),
            plan=plan.model_dump(mode="json"),
        )
    )
    shown = cli_inproc("status", plan.job_id, "--json").json()
    assert shown["reports"] == [
        str(job_dir / "nsys" / f"{plan.job_id}-{n}.nsys-rep") for n in (0, 1)
    ]
    assert (
        f"report  {job_dir}/nsys/{plan.job_id}-1.nsys-rep" in cli_inproc("status", plan.job_id).out
    )


def test_a_container_works_in_the_jobs_folder_so_relative_checkpoints_stay_shared(tmp_path):
    """With a container, the job's working directory is mounted and is the container's
    working directory: `checkpoints/` lands where the batch shell's resume step looks."""
    workdir = tmp_path / "runs dir $(x)"
    text = (
        "command: python -m trainer -c {config}\n"
        "checkpoint: {checkpoint_dir: checkpoints/}\n"
        f"slurm: {{container_image: 'nvcr.io/nvidia/nemo:dev', workdir: '{workdir}'}}\n"
    )
    script = script_of(tmp_path, text)
    quoted = shlex.quote(str(workdir))
    assert f"#SBATCH --chdir={quoted}" in script
    srun = next(line for line in script.splitlines() if "srun --ntasks=1 " in line)
    assert f"--container-workdir={quoted}" in srun
    assert (
        f'--container-mounts="$ANYLAUNCH_JOB_DIR":"$ANYLAUNCH_JOB_DIR",{quoted}:{quoted} ' in srun
    )
    # The resume step runs in the batch shell, whose working directory is the same folder.
    assert "checkpoints" in script.split("# The program of every task", 1)[0]
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0


def test_array_index_lists_write_runs_as_ranges_and_keep_every_id():
    from anylaunch.backends.slurm.script import array_ids

    assert array_ids(list(range(10_000))) == "0-9999"
    assert array_ids([0, 1, 5]) == "0,1,5"
    assert array_ids([2, 3, 4, 7, 9, 10, 11, 12]) == "2-4,7,9-12"
    ids = [0, 1, 2, 4, 6, 7, 8, 9, 30]
    expanded = []
    for part in array_ids(ids).split(","):
        first, _, last = part.partition("-")
        expanded += range(int(first), int(last or first) + 1)
    assert expanded == ids


def test_a_retry_policy_that_retries_a_time_limit_makes_the_job_requeue_itself(tmp_path):
    timed = 'command: t\nslurm:\n  time: "00:30:00"\n'
    script = script_of(tmp_path, timed + "retry: {max_attempts: 3}\n")
    assert '[ "$ANYLAUNCH_ATTEMPT" -lt 3 ] || return 0' in script
    assert 'scontrol requeue "$SLURM_JOB_ID"' in script and "continue_job;" in script
    assert '"$ANYLAUNCH_JOB_DIR/attempts.jsonl"' in script
    # Not without a policy, nor with one that does not retry a time limit.
    for text in (timed, timed + "retry: {max_attempts: 3, on: [NCCL_TIMEOUT]}\n"):
        assert "scontrol requeue" not in script_of(tmp_path, text)


def test_the_attempts_a_job_records_of_itself_are_read_as_untrusted_input(tmp_path):
    from anylaunch.backends.slurm import continuation
    from anylaunch.observe.diagnose.classes import BY_CODE
    from anylaunch.state import State
    from anylaunch.store import JobRecord

    (tmp_path / "attempts.jsonl").write_text(
        '{"attempt": 1, "started_at": 10, "nodes": ["n1"]}\n'
        "not json\n"
        '{"attempt": true}\n{"attempt": 999}\n["attempt", 1]\n'
        '{"attempt": 1, "ended_at": 70, "state": "TIMEOUT", "diagnosis": {"code": "TIME_LIMIT"},'
        ' "next": "TIME_LIMIT is retried: attempt 2 of 3"}\n'
        '{"attempt": 2, "started_at": 200, "state": "BOGUS", "diagnosis": {"code": "rm -rf"},'
        ' "nodes": "n2"}\n'
    )
    job = JobRecord(id="j", name="n", backend="slurm", state=State.RUNNING, job_dir=str(tmp_path))
    first, second = continuation.read(job)
    assert first == {
        "attempt": 1, "started_at": 10, "nodes": ["n1"], "ended_at": 70, "state": State.TIMEOUT,
        "diagnosis": {"code": "TIME_LIMIT", "err_class": "ERR_PROGRAM", "retryable": True,
                      "cause": BY_CODE["TIME_LIMIT"].cause,
                      "suggestion": BY_CODE["TIME_LIMIT"].suggestion, "node": None},
        "next": "TIME_LIMIT is retried: attempt 2 of 3",
    }  # fmt: skip
    assert second == {"attempt": 2, "started_at": 200}


def test_a_retry_policy_makes_a_failed_attempt_read_its_logs_and_continue_itself(tmp_path):
    """After srun fails, the in-job triage decides (the classes `on:` retries, spelled
    out); the nodes the job was sent to avoid stay avoided; without --requeue nothing."""
    base = "command: t\nretry: {max_attempts: 3, on: [infra]}\n"
    script = script_of(tmp_path, base)
    assert '"$ANYLAUNCH_JOB_DIR/anylaunch_job.pyz" marks "$ANYLAUNCH_JOB_DIR/logs"' in script
    line = next(x for x in script.splitlines() if 'pyz" triage ' in x)
    assert '--attempt "$ANYLAUNCH_ATTEMPT" --most 3 --rc "$rc"' in line
    retried = line.split("--on ", 1)[1].split()[0].split(",")
    assert "HARDWARE_GPU" in retried and "USER_ERROR" not in retried
    assert line.endswith('&& exit "$rc"') and "--avoided" not in line
    assert script.index('pyz" triage ') < script.index('exit "$rc"\n')
    assert "trap '' TERM" in script  # the requeue's SIGTERM waits for its record
    off = script_of(tmp_path, base + "slurm: {requeue: false}\n")
    assert 'pyz" triage ' not in off and " marks " not in off
    assert 'pyz" triage ' not in script_of(tmp_path, "command: t\nretry: {max_attempts: 1}\n")


def test_the_nodes_and_diagnosis_a_job_recorded_are_kept_as_hosts(tmp_path):
    from anylaunch.backends.slurm import continuation
    from anylaunch.state import State
    from anylaunch.store import JobRecord

    (tmp_path / "attempts.jsonl").write_text(
        '{"attempt": 1, "ended_at": 70, "state": "FAILED", "exit_code": 1,'
        ' "diagnosis": {"code": "HARDWARE_GPU", "node": "n1"}, "next": "avoiding n1"}\n'
        '{"attempt": 2, "avoided": ["n1", 7]}\n'
        '{"attempt": 3, "diagnosis": {"code": "NCCL_TIMEOUT", "node": ["x"]}}\n'
    )
    job = JobRecord(id="j", name="n", backend="slurm", state=State.RUNNING, job_dir=str(tmp_path))
    first, second, third = continuation.read(job)
    assert first["diagnosis"]["node"] == "n1" and first["exit_code"] == 1
    assert second == {"attempt": 2, "avoided": ["n1", "7"]}
    assert third["diagnosis"]["node"] is None
