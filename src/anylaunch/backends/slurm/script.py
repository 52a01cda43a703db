"""Render the sbatch script of a job: pure text, no cluster.

The script has three parts, which a user template (`slurm.template`) may arrange:
`{{ sbatch }}` the #SBATCH header, `{{ setup }}` the environment every node shares, and
`{{ launch }}` the per-task program started by srun. Values that differ per node
(NODE_RANK, RANK) are derived inside each task from Slurm's variables: a value computed
once in the batch shell runs on the first node only and is wrong everywhere else.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field

from anylaunch.backends.slurm import continuation, gres
from anylaunch.backends.slurm.config import SlurmSection, duration_seconds
from anylaunch.jobfile.mounts import Mount
from anylaunch.jobfile.secrets import name_pattern
from anylaunch.jobfile.spec import JobSpec
from anylaunch.node import checkpoint, command, rendezvous, runtime, shell
from anylaunch.node import script as node_script
from anylaunch.node.runtime import live
from anylaunch.node.shell import Sh, Word, concat, export, path, var, word, words

RECIPE_FILE = "recipe.yaml"
# The in-job runtime (staging, resume): the batch shell writes it into the job's directory.
RUNTIME_WORD = f'"$ANYLAUNCH_JOB_DIR/{runtime.FILE_NAME}"'
# Defaults for NCCL that a job file (`env:`) or the submitting environment overrides.
NCCL_DEFAULTS = {
    "NCCL_DEBUG": "WARN",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    "PYTHONUNBUFFERED": "1",  # rank output reaches the log files as it is printed
}
EXIT_MOUNT_MISSING = 97
# The batch shell's exit when srun's own status never reached it (its waiter was killed).
EXIT_STATUS_LOST = 96
EXIT_PORT_IN_USE = 98


@dataclass(frozen=True)
class Split:
    """One task of an array: its split id and its anylaunch job."""

    split_id: int
    job_id: str
    job_dir: str
    value: str | None = None  # SPLIT_VALUE, when the run lists one value per split
    attempt: int = 1  # ANYLAUNCH_ATTEMPT: a retried split's earlier attempts count
    env: dict[str, str] = field(default_factory=dict)  # its run key (launch/runkey.py)


@dataclass(frozen=True)
class Job:
    """Everything rendering needs, resolved from the spec, the section and the context."""

    spec: JobSpec
    section: SlurmSection
    job_id: str
    job_dir: str
    name: str
    nodes: int
    ntasks: int  # ranks per node
    gpus: int  # GPUs asked of each node (0: none)
    workdir: str
    splits: list[Split] = field(default_factory=list)  # empty: not an array
    staging: str | None = None  # the staging manifest's path, when the job stages data
    stage_python: str = "python3"  # runs the in-job runtime (its standard library only)
    py_spy: str | None = None  # the submitting side's py-spy, for the watchdog's dumps
    exclude: list[str] = field(default_factory=list)  # nodes where earlier attempts failed

    @property
    def launcher(self) -> str:
        return self.spec.launcher

    @property
    def world_size(self) -> int:
        return self.nodes if self.launcher == "none" else self.nodes * self.ntasks

    @property
    def image(self) -> str | None:
        return self.section.container_image or self.spec.image

    @property
    def nsys(self) -> bool:
        return self.section.nsys_enabled or bool(self.spec.profile and self.spec.profile.nsys)

    @property
    def time_s(self) -> int | None:
        return duration_seconds(self.section.time) if self.section.time else None


def pyxis_image(image: str) -> str:
    """`nvcr.io/nvidia/nemo:dev` -> `nvcr.io#nvidia/nemo:dev`: Pyxis wants `#` after a registry.

    Docker Hub names (`ubuntu:22.04`), squashfs files and images already in Pyxis form
    are left alone.
    """
    if "#" in image or image.startswith(("/", "./", "../")) or image.endswith(".sqsh"):
        return image
    host, sep, rest = image.partition("/")
    if sep and ("." in host or ":" in host or host == "localhost"):
        return f"{host}#{rest}"
    return image


def sbatch_header(job: Job, output: str) -> list[str]:
    """The #SBATCH lines; sbatch reads them with shell-like quoting, so values are quoted."""
    s = job.section
    opts: list[tuple[str, str | None]] = [
        ("--job-name", job.name),
        ("--nodes", str(job.nodes)),
        ("--ntasks-per-node", str(job.ntasks)),
    ]
    if s.time:
        opts.append(("--time", s.time))
    for flag, value in (
        ("--account", s.account),
        ("--partition", s.partition),
        ("--qos", s.qos),
        ("--reservation", s.reservation),
        ("--constraint", s.constraint),
        ("--gres", s.gres),
        ("--mem", s.mem),
        ("--dependency", s.dependency),
    ):
        if value:
            opts.append((flag, value))
    # --gpus-per-node, as AutoModel's launcher, submitit and NeMo-Run write it: Slurm's own
    # option for GPUs on every node. A `gres` that names GPUs asks for them itself.
    if not gres.requested(s.gres) and (job.gpus or s.gpus_per_node is not None):
        opts.append(("--gpus-per-node", str(job.gpus)))
    if s.cpus_per_task is not None:
        opts.append(("--cpus-per-task", str(s.cpus_per_task)))
    if s.exclusive:
        opts.append(("--exclusive", None))
    if job.exclude:
        opts.append(("--exclude", ",".join(job.exclude)))
    if job.splits:
        spec = array_ids([split.split_id for split in job.splits])
        if s.array_parallelism:
            spec += f"%{s.array_parallelism}"
        opts.append(("--array", spec))
    opts += [("--chdir", job.workdir), ("--output", output), ("--open-mode", "append")]
    if s.time and s.signal:
        # B: signals the batch shell, which forwards to the ranks (a plain --signal would
        # reach only job steps, and torchrun would die of it).
        opts.append(("--signal", f"B:{s.signal}@{s.signal_lead}"))
    opts.append(("--requeue" if s.requeue else "--no-requeue", None))
    opts.append(("--comment", f"anylaunch:{job.job_id}"))
    lines = [
        f"#SBATCH {flag}" + ("" if value is None else f"={word(value)}") for flag, value in opts
    ]
    lines += [f"#SBATCH {line}" for line in s.sbatch_lines]
    return lines


def array_ids(ids: list[int]) -> str:
    """`--array`'s index list, runs of three or more as ranges (`0-999,1003`): the line
    of a 10,000-task array stays short."""
    parts: list[str] = []
    start = 0
    for i in range(1, len(ids) + 1):
        if i < len(ids) and ids[i] == ids[i - 1] + 1:
            continue
        first, last = ids[start], ids[i - 1]
        if i - start >= 3:
            parts.append(f"{first}-{last}")
        else:
            parts += [str(n) for n in ids[start:i]]
        start = i
    return ",".join(parts)


def setup(job: Job) -> list[str]:
    """The batch shell's part: identity, rendezvous, environment, checks on every node."""
    s, spec = job.section, job.spec
    out = ["set -uo pipefail"]
    if s.time and s.signal:
        # Slurm may send the early signal as soon as the job starts; its default action
        # would kill this shell. Remember it until srun runs (see launch()).
        out.append(f"early_signal=0; trap 'early_signal=1' {s.signal}")
    out.append("")
    if job.splits:
        out.append("# One anylaunch job per array task: its split id, id and directory.")
        out.append('export SPLIT_ID="$SLURM_ARRAY_TASK_ID"')
        out.append('case "$SPLIT_ID" in')
        per_job = sorted({name for split in job.splits for name in split.env})
        for split in job.splits:
            value = "" if split.value is None else f" SPLIT_VALUE={word(split.value)}"
            extra = "".join(f" {name}={word(split.env[name])}" for name in sorted(split.env))
            out.append(
                f"  {split.split_id}) ANYLAUNCH_JOB_ID={word(split.job_id)}"
                f" ANYLAUNCH_JOB_DIR={word(split.job_dir)}{value}"
                f" ANYLAUNCH_ATTEMPT={split.attempt}{extra} ;;"
            )
        out.append("esac")
        out.append(
            " ".join(["export ANYLAUNCH_JOB_ID ANYLAUNCH_JOB_DIR ANYLAUNCH_ATTEMPT", *per_job])
        )
        if any(split.value is not None for split in job.splits):
            out.append("export SPLIT_VALUE")
        out.append('mkdir -p "$ANYLAUNCH_JOB_DIR/logs"')
        out.append('exec >>"$ANYLAUNCH_JOB_DIR/logs/node-0.log" 2>&1')
    else:
        out.append(export("ANYLAUNCH_JOB_ID", job.job_id))
        out.append(export("ANYLAUNCH_JOB_DIR", job.job_dir))
    out += ["", *rendezvous.slurm_batch(s.master_port, job.nodes, job.ntasks, job.world_size)]
    if job.time_s:
        out.append("# When Slurm will kill the job (epoch seconds), for programs that checkpoint.")
        out.append(f"export ANYLAUNCH_DEADLINE=$(( $(date +%s) + {job.time_s} ))")
    user_env = {**spec.public_env(), **s.public_env()}
    secret_names = sorted({*spec.secret_env(), *s.secret_env()})
    out.append("")
    out.append("# Defaults that env: or the submitting environment override.")
    for name, value in NCCL_DEFAULTS.items():
        if name not in user_env:
            out.append(f"export {name}=${{{name}:-{value}}}")
    if s.hf_home:
        out.append(export("HF_HOME", path(s.hf_home)))
    if s.nemo_mount:
        out.append(f"export PYTHONPATH={word(s.nemo_mount.dest)}${{PYTHONPATH:+:$PYTHONPATH}}")
    if user_env:
        # In the batch shell, so the steps here (stage-in) see them too; `$NAME` in a
        # value expands on the node, as in the job's command.
        out.append("")
        out.append("# env: and slurm.env_vars (an unset $NAME in a value is empty, not an error)")
        out += ["set +u", *node_script.env_exports(user_env), "set -u"]
    if secret_names:
        out.append(
            "# Secrets reach the job from the submitting environment (sbatch --export),"
            f" never this file: {', '.join(secret_names)}"
        )
    folder = checkpoint.checkpoint_dir(spec)
    if spec.notify:
        out.append("anylaunch_started=$(date +%s)  # for the duration that notify: reports")
    # The in-job runtime's steps this job runs, the first named in the error without python.
    steps = [
        name
        for name, needed in (
            ("resume", folder),
            ("stage-in", job.staging),
            ("watchdog", spec.watchdog is not None),
            ("signal", s.time and s.signal),
        )
        if needed
    ]
    if steps:
        first = steps[0]
        out += [
            "",
            f"# The in-job runtime ({', '.join(steps)}), carried in this script.",
            runtime.write_shell(RUNTIME_WORD, None, first, job.stage_python),
        ]
    elif spec.notify or continuation.failure_attempts(spec):
        out += [
            "",
            "# The in-job runtime, for notify: or a failed attempt's triage alone (without",
            "# python3 here, the next poll on the submitting side does their work).",
            runtime.write_shell(RUNTIME_WORD, None, "notify", job.stage_python, needed=False),
        ]
    out += ["", *_resume(job)]
    if continuation.continues(spec):
        out += continuation.start_lines()
    if job.staging:
        # Inputs land once on the shared filesystem (the cache, or the job's directory)
        # before any task starts; every node then reads them in place.
        out += [
            "",
            "# Stage-in (S3 inputs through the shared-filesystem cache).",
            f"{_stage(job, 'in')} || exit $?",
        ]
    check = _node_check(job)
    if check:
        out += ["", *check]
    return out


def _resume(job: Job) -> list[str]:
    """What the job is told to resume: which attempt this is, and where to resume from.

    A Slurm requeue runs this script again: SLURM_RESTART_COUNT counts those, on top of
    the attempt anylaunch started (a retried split is attempt 2 before any requeue). The
    checkpoint folder is on a shared filesystem, so the batch shell looks once and srun
    passes the answer to every task.
    """
    out = [
        "# The resume contract: this attempt and the newest complete checkpoint.",
        "export ANYLAUNCH_ATTEMPT=$(( ${SLURM_RESTART_COUNT:-0} + ${ANYLAUNCH_ATTEMPT:-1} ))",
    ]
    folder = checkpoint.checkpoint_dir(job.spec)
    if folder:
        out.append(checkpoint.shell(folder, RUNTIME_WORD))
        fill = checkpoint.config_fill(job.spec, f'"$ANYLAUNCH_JOB_DIR/{RECIPE_FILE}"', RUNTIME_WORD)
        if fill:
            out.append(fill)
    return out


def _node_check(job: Job) -> list[str]:
    """Mount sources must exist on every node, not just where anylaunch runs."""
    s, spec = job.section, job.spec
    sources = [m.source for m in s.extra_mounts] + [m.source for m in spec.mounts]
    if s.nemo_mount:
        sources.append(s.nemo_mount.source)
    if not sources and not s.hf_home:
        return []
    script = (
        'for p in "$@"; do [ -e "$p" ] || { echo "anylaunch: mount source $p is missing on node'
        ' $SLURMD_NODENAME — create it on every node or fix slurm.extra_mounts" >&2;'
        f" exit {EXIT_MOUNT_MISSING}; }}; done"
    )
    if s.hf_home:
        script = 'mkdir -p "$HF_HOME" && ' + script
    argv: list[Word] = ["srun", f"--ntasks={job.nodes}", "--ntasks-per-node=1"]
    argv += _log_options()
    argv += ["bash", "-c", script, "anylaunch-check", *(path(src) for src in sources)]
    return ["# Check on every node that the mount sources exist.", f'{words(argv)} || exit "$?"']


def _log_options() -> list[Word]:
    return [
        concat("--output=", var("ANYLAUNCH_JOB_DIR"), "/logs/node-%n.log"),
        "--open-mode=append",
    ]


_LEADING_PYTHON = re.compile(r"\A\s*python3?(?=\s|\Z)")


def _command(job: Job) -> str | list[str]:
    """The job's command; `slurm.python` stands in for a leading `python` in either form."""
    s, cmd = job.section, job.spec.command
    if not s.python:
        return cmd
    if isinstance(cmd, str):
        return _LEADING_PYTHON.sub(lambda _: shlex.quote(s.python or ""), cmd, count=1)
    if cmd and cmd[0] in ("python", "python3"):
        return [s.python, *cmd[1:]]
    return cmd


def task_body(job: Job) -> list[str]:
    """What every task runs: rank variables, pitfall checks, hooks, the program."""
    s, spec = job.section, job.spec
    lines = [
        *rendezvous.slurm_task(job.launcher, job.ntasks),
        'echo "anylaunch: task $SLURM_PROCID, node $SLURM_NODEID of $NNODES on'
        f' $SLURMD_NODENAME (launcher: {job.launcher})" >&2',
    ]
    if s.time and s.signal:
        lines.append(
            f"# {s.signal} before the time limit goes only to the processes here that handle"
            " it (see launch()); nothing here ignores it, so a rank starts with the default"
            " and a framework can install its own handler."
        )
        lines.append(f"export {live.IN_STEP}=1")
    lines += [
        'if [ "$SLURM_PROCID" = 0 ] && (exec 3<>"/dev/tcp/127.0.0.1/$MASTER_PORT") 2>/dev/null; then',
        '  echo "anylaunch: MASTER_PORT $MASTER_PORT is already in use on $SLURMD_NODENAME'
        ' — set slurm.master_port to a free port" >&2',
        f"  exit {EXIT_PORT_IN_USE}",
        "fi",
    ]
    wrap: list[Word] = []
    if job.nsys:
        out_dir: Word = (
            path(spec.profile.output_dir)
            if spec.profile and spec.profile.output_dir
            else var("ANYLAUNCH_JOB_DIR")
        )
        report = concat(out_dir, "/nsys/", var("ANYLAUNCH_JOB_ID"), "-", var("SLURM_NODEID"))
        if job.launcher == "srun":
            report = concat(report, "-", var("SLURM_LOCALID"))
        lines.append(f"mkdir -p {word(concat(out_dir, '/nsys'))}")
        nsys_args = spec.profile.nsys_args if spec.profile else []
        wrap = ["nsys", "profile", "-o", report, "--force-overwrite=true", *nsys_args]
    launcher: tuple[Word, ...] = (
        (s.python, "-m", "torch.distributed.run") if s.python else ("torchrun",)
    )
    return node_script.lines(
        node_script.NodeScript(
            command=_command(job),
            launcher=job.launcher,
            torchrun=command.Torchrun(job.ntasks, launcher=launcher),
            rendezvous=lines,
            pre=spec.hooks.pre,
            post=spec.hooks.post,
            config=concat(var("ANYLAUNCH_JOB_DIR"), f"/{RECIPE_FILE}"),
            wrap=wrap,
        )
    )


def launch(job: Job) -> list[str]:
    """The srun line and the batch shell's wait, forwarding the early signal, so the
    program can checkpoint before the time limit kills it."""
    s = job.section
    body = "\n".join(task_body(job))
    tag = shell.heredoc_tag(body)
    srun: list[Word] = ["srun"]
    if job.launcher == "srun":
        srun += [f"--ntasks-per-node={job.ntasks}", "--kill-on-bad-exit=1"]
    else:
        cpus = job.ntasks * (s.cpus_per_task or 1)
        srun += [
            f"--ntasks={job.nodes}",
            "--ntasks-per-node=1",
            f"--cpus-per-task={cpus}",
            "--kill-on-bad-exit=1",
        ]
    srun += _log_options()
    if job.image:
        srun.append(f"--container-image={pyxis_image(job.image)}")
        mounts = _container_mounts(job)
        if mounts:
            joined: list[Word] = ["--container-mounts="]
            for i, mount in enumerate(mounts):
                joined += ([","] if i else []) + [mount]
            srun.append(concat(*joined))
        # The job's working folder is mounted and is the container's working directory,
        # so relative paths (a recipe's `checkpoint_dir: checkpoints/`) land on shared
        # storage, where the resume step looks, not in the container's throwaway layer.
        srun.append(concat("--container-workdir=", job.workdir))
    out = [
        f"# The program of every task (launcher: {job.launcher}).",
        f"read -r -d '' ANYLAUNCH_TASK <<'{tag}' || true",
        body,
        tag,
        *(
            [continuation.marks_line(RUNTIME_WORD, job.stage_python)]
            if continuation.failure_attempts(job.spec)
            else []
        ),
        *_start_waiter(words(srun) + ' bash -c "$ANYLAUNCH_TASK"', s.signal if s.time else None),
    ]
    if s.time and s.signal:
        out += _forward_signal(job)
    out += _watchdog(job)
    out += [
        "# srun's exit status: a read that a trapped signal interrupts is read again.",
        'rc=""; until read -r rc <&"$srun_status"; do [ "$?" -gt 128 ] || break; done',
        'if [ -z "$rc" ]; then',
        "  echo \"anylaunch: srun's exit status was lost: the process waiting for it ended"
        f' first" >&2; rc={EXIT_STATUS_LOST}',
        "fi",
    ]
    if s.time and s.signal:
        out += _end_forwarding(s.signal)
    if job.spec.watchdog is not None:
        out.append(
            f'wait "$watch_pid"; [ "$?" = {live.EXIT_HUNG} ] && rc={live.EXIT_HUNG}'
            "  # stopped by the watchdog"
        )
    if continuation.max_attempts(job.spec):
        out += continuation.end_lines()
    hung = live.EXIT_HUNG if job.spec.watchdog is not None else None
    out += continuation.failure_lines(job.spec, RUNTIME_WORD, job.stage_python, job.exclude, hung)
    if job.staging and job.spec.outputs:
        out += [
            "# Stage-out: outputs to S3, after failures too; its failure fails a successful job.",
            f'{_stage(job, "out")} || {{ out_rc=$?; [ "$rc" = 0 ] && rc=$out_rc; }}',
        ]
    out += _notify(job)
    out.append('exit "$rc"')
    return out


def _notify(job: Job) -> list[str]:
    """`notify:` announced by the job itself at its end, inside its allocation (a login
    node may end our processes at logout); a receipt per target in the job's folder tells
    the submitting side, whose next poll announces what this could not (a job that
    Slurm killed, a receiver that stayed down)."""
    if not job.spec.notify:
        return []
    targets = [
        {"on": t.on, "url_env": t.url_env} if t.url_env else {"on": t.on, "command": t.command}
        for t in job.spec.notify
    ]
    facts = {
        "name": job.name,
        "backend": "slurm",
        "secrets": sorted({*job.spec.secret_env(), *job.section.secret_env()}),
        "secret_pattern": name_pattern(),
    }
    argv: list[Word] = [
        job.stage_python, *runtime.FLAGS, Sh(RUNTIME_WORD), "notify",
        "--job-id", var("ANYLAUNCH_JOB_ID"), "--job-dir", var("ANYLAUNCH_JOB_DIR"),
        "--rc", var("rc"), "--started", var("anylaunch_started"),
        "--facts", json.dumps(facts), "--targets", json.dumps(targets),
    ]  # fmt: skip
    return [
        "# notify: the job announces its own end; its failure never changes the job's.",
        f"[ -f {RUNTIME_WORD} ] && {words(argv)} || true",
    ]


def _forward_signal(job: Job) -> list[str]:
    """The batch shell's trap for the early signal (sent to it alone: `--signal=B:`).

    A step on every node passes the signal to each of the program's processes that
    handles it, and to no other (the runtime's `signal`). Sending it to the whole step
    (`kill srun`, or `--signal` without `B:`) would kill torchrun and every rank that has
    no handler, since a signal's default action is to end the process; ignoring it in
    the step instead, as a shell's `trap ''` does, is inherited by every rank, and
    Lightning's SLURMEnvironment then counts the ignored signal as a handler already
    there and does not install its requeue handler.

    That step looks again until a rank handles the signal, up to the limit (ranks may
    still be starting), so it runs in the background: waiting for it in the trap would
    hold the batch shell, and with it the allocation, until the limit after a program
    that handles no signal has ended (`_end_forwarding` stops it once srun has ended).
    """
    s = job.section
    step: list[Word] = [
        "srun", "--overlap", f"--nodes={job.nodes}", f"--ntasks={job.nodes}",
        "--ntasks-per-node=1", "--quiet", job.stage_python, *runtime.FLAGS, Sh(RUNTIME_WORD),
        "signal", var("ANYLAUNCH_JOB_ID"), str(s.signal), var("program_ended"),
    ]  # fmt: skip
    say = (
        f'echo "anylaunch: {s.signal} {s.signal_lead}s before the time limit; passing it'
        ' to the ranks that handle it"'
    )
    most = continuation.max_attempts(job.spec)
    # The job continues itself after the limit (continuation.py).
    then = "continue_job; " if most else ""
    # The trap ignores the signal while it runs: a second one arriving between the `&`
    # and the line that records `$!` would run the trap again inside it, and `$!` would
    # then name the inner step twice and lose the outer one, which nothing would wait for.
    trap = f"trap forward_signal {s.signal}"
    return [
        *(continuation.continue_lines(most) if most else []),
        f"forward_signal() {{ trap '' {s.signal}; {say}; {then}{words(step)} &"
        f' forward_pids="$forward_pids $!"; {trap}; }}',
        'forward_pids=""',
        # Per run: a requeued job runs again in the same folder.
        'program_ended="$ANYLAUNCH_JOB_DIR/.program-ended.$SLURM_JOB_ID.${SLURM_RESTART_COUNT:-0}"',
        trap,
        'if [ "$early_signal" = 1 ]; then forward_signal; fi',
    ]


# How long the batch shell waits, once the program ended, for the steps passing on the
# early signal: a running step sees the file within a second, but an srun that could not
# start its step (the controller away, restarting) never will, and would hold the
# allocation until the limit.
FORWARD_GRACE_S = 30


def _end_forwarding(signal: str) -> list[str]:
    """After srun: a step still looking for a rank to pass the early signal to will
    never find one. It stops when it sees the file that says so, and ends with exit 0;
    one still there after FORWARD_GRACE_S is ended. The signal is ignored from here on,
    so no step starts after that file is gone."""
    return [
        "# The program ended: the early signal has no rank left to reach, and a step still",
        "# passing it on stops looking.",
        f"trap '' {signal}",
        ': > "$program_ended"',
        f"forward_until=$((SECONDS + {FORWARD_GRACE_S}))",
        "for pid in $forward_pids; do",
        '  while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$forward_until" ]; do sleep 0.2; done',
        '  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null',
        "done",
        'rm -f "$program_ended"',
    ]


def _watchdog(job: Job) -> list[str]:
    """The hang watchdog, run by this batch shell inside the allocation (never on the
    login node): with no output from any node for `watchdog.idle` seconds, a step on
    every node writes each rank's Python stack into node 0's log, and srun is stopped."""
    if job.spec.watchdog is None:
        return []
    runtime_word = RUNTIME_WORD
    python = job.stage_python
    stack: list[Word] = [
        "srun", "--overlap", f"--nodes={job.nodes}", f"--ntasks={job.nodes}",
        "--ntasks-per-node=1", "--quiet", python, *runtime.FLAGS, Sh(runtime_word), "stack",
        var("ANYLAUNCH_JOB_ID"), "--secret-pattern", name_pattern(),
    ]  # fmt: skip
    if job.py_spy:
        stack += ["--py-spy", job.py_spy]
    for name in sorted({*job.spec.secret_env(), *job.section.secret_env()}):
        stack += ["--secret", name]
    logs = [concat(var("ANYLAUNCH_JOB_DIR"), f"/logs/node-{n}.log") for n in range(job.nodes)]
    watch: list[Word] = [
        python, *runtime.FLAGS, Sh(runtime_word), "watch",
        "--idle", f"{job.spec.watchdog.idle:g}", "--pid", var("srun_pid"),
        "--log", logs[0], "--logs", *logs, "--", *stack,
    ]  # fmt: skip
    return [
        f"# The hang watchdog: {job.spec.watchdog.idle:g}s without output from any node writes"
        " every rank's Python stack into node 0's log, then stops srun.",
        f"{words(watch)} &",
        "watch_pid=$!",
    ]


def _start_waiter(srun: str, forwarded: str | None) -> list[str]:
    """Start srun under a process that only waits for it, and read srun's pid from it.

    The batch shell's own `wait "$srun_pid"` returns early when a trapped signal arrives
    (the early signal, a template's trap). If srun ends at that moment, bash may already
    have collected srun's status: `wait` then answers 128+signal, and a job whose srun
    ended 0 ends FAILED (a second `wait` is no cure: bash 5.2 then answers 127, or -1,
    for a status it already collected). A process that
    traps nothing has nothing to interrupt its `wait`: it prints srun's pid, then srun's
    exit status, on a pipe the batch shell reads. It ignores the forwarded signal, which
    `scancel --batch` also sends it; srun gets that signal's default back, as before.
    """
    if forwarded:
        srun = f"trap '' {forwarded}; (trap - {forwarded}; exec {srun})"
    return [
        "# srun runs under a process that only waits for it: it prints srun's pid, then srun's",
        "# exit status. The batch shell's own wait, interrupted by a trapped signal as srun",
        "# ends, can answer 128+signal or lose srun's status.",
        "exec {srun_out}>&1",
        f'exec {{srun_status}}< <({srun} >&"$srun_out" & echo "$!"; wait "$!"; echo "$?")',
        'srun_pid=""; until read -r srun_pid <&"$srun_status"; do [ "$?" -gt 128 ] || break; done',
    ]


def _stage(job: Job, direction: str) -> str:
    assert job.staging is not None
    return runtime.shell(
        RUNTIME_WORD, "stage", direction, word(path(job.staging)), python=job.stage_python
    )


def _container_mounts(job: Job) -> list[Word]:
    s, spec = job.section, job.spec
    mounts: list[Word] = []
    nemo = [s.nemo_mount] if s.nemo_mount else []
    named: list[Mount] = [*s.extra_mounts, *nemo, *spec.mounts]
    for m in named:
        mounts.append(concat(path(m.source), ":", path(m.dest), ":ro" if m.readonly else ""))
    if s.hf_home:
        mounts.append(concat(path(s.hf_home), ":", path(s.hf_home)))
    # The job's directory: the recipe file and nsys reports live there.
    mounts.append(concat(var("ANYLAUNCH_JOB_DIR"), ":", var("ANYLAUNCH_JOB_DIR")))
    # The job's working directory, unless a mount above already puts it there.
    mounted = [*s.extra_mounts, *([s.nemo_mount] if s.nemo_mount else []), *spec.mounts]
    dests = {str(m.dest) for m in mounted} | {job.job_dir, s.hf_home}
    if job.workdir not in dests:
        mounts.append(concat(path(job.workdir), ":", path(job.workdir)))
    return mounts
