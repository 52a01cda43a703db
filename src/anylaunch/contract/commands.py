"""Each command as an operation: arguments (a model of `contract.inputs`) in, the object
that `--json` prints out.

The CLI and the MCP server both call these, so an agent gets the same objects through
either, and neither has a second copy of how a status or a log answer is assembled.
The answers are plain dicts. The commands that read a job file import the launch
stages (and with them pydantic and the job file's models) when they run: `ps`, `status`
and `logs` never need them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from anylaunch.errors import UsageError
from anylaunch.observe import watch
from anylaunch.store import home

if TYPE_CHECKING:
    from pydantic import BaseModel

    from anylaunch.backends.checks import Check
    from anylaunch.backends.plan import Plan
    from anylaunch.contract import inputs
    from anylaunch.jobfile.spec import JobSpec
    from anylaunch.launch.resolve import Resolved
    from anylaunch.observe.runs import RunView

    M = TypeVar("M", bound=BaseModel)

Note = Callable[[str], None]


def parse(model: type[M], data: dict[str, Any]) -> M:
    """Validate arguments; a bad one is a one-line UsageError naming the argument."""
    from pydantic import ValidationError

    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "arguments"
        fix = _ARG_FIX.get(first["type"], "")
        raise UsageError(f"{where}: {first['msg']}{fix}") from None


_ARG_FIX = {
    "extra_forbidden": " — remove it (see the tool's input schema)",
    "missing": " — add it",
}


# -- a job file -----------------------------------------------------------------------


def job_path(args: inputs.JobFile) -> str:
    """The job file's path; YAML text is written under $ANYLAUNCH_HOME/jobfiles/ first.

    Named by the text's hash, so sending the same text twice names the same file and a
    run of splits keyed on its source resumes rather than starting again. The path is
    what the job's record keeps as its source.
    """
    if args.file is not None:
        return args.file
    import hashlib  # only for YAML text; hashlib (OpenSSL) costs every other command ~10 ms

    from anylaunch.store import private

    text = args.yaml or ""
    folder = private.folder(home() / "jobfiles")
    path = folder / f"{hashlib.sha256(text.encode()).hexdigest()[:16]}.yaml"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        private.write(tmp, text)
        tmp.replace(path)
    return str(path)


def load(args: inputs.JobFile) -> JobSpec:
    from anylaunch import api

    command = getattr(args, "command", None) or None
    return api.load(job_path(args), overrides=args.overrides, command=command)


def dry_run(args: inputs.DryRunArgs) -> dict[str, Any]:
    return dry_run_file(job_path(args), args.backend, args.overrides, args.command)


def dry_run_file(
    path: str, backend: str | None, overrides: Sequence[str], command: Sequence[str]
) -> dict[str, Any]:
    """What `run --dry-run --json` prints for a job file (a workflow's steps, or a job)."""
    from anylaunch.workflow.detect import is_workflow

    if is_workflow(path):
        from anylaunch.workflow import commands as workflows

        refuse_job_options(backend, overrides, command)
        return workflows.dry_run(path, None, None)
    job, plan = dry_run_job(path, backend, overrides, command)
    return {
        "id": None, "kind": "job", "dry_run": True, "backend": job.backend,
        "plan": plan.to_json(),
    }  # fmt: skip


def refuse_job_options(
    backend: str | None, overrides: Sequence[str], command: Sequence[str]
) -> None:
    """A workflow's steps each say their backend, settings and command: one given for the
    whole file would apply to no step, so it is refused rather than dropped."""
    if command or backend or overrides:
        raise UsageError(
            "a workflow takes no backend, overrides (--set) or command: write them in its steps"
        )


def dry_run_job(
    path: str, backend: str | None, overrides: Sequence[str], command: Sequence[str]
) -> tuple[Resolved, Plan]:
    """A job file's plan, rendered by the stages a submit takes, and the job it is of."""
    from anylaunch import api
    from anylaunch.launch import pipeline
    from anylaunch.launch.resolve import resolve
    from anylaunch.store import Store

    job = resolve(api.load(path, overrides=overrides, command=list(command) or None), backend)
    return job, pipeline.dry_run(job, Store())


def start(args: inputs.RunArgs, *, warn: Callable[[Check], None] | None = None) -> watch.Job | str:
    """Preflight (unless switched off), then submit: a Job, or the id of a run of splits."""
    from anylaunch.launch import pipeline
    from anylaunch.launch.resolve import resolve
    from anylaunch.store import Store

    job = resolve(load(args), args.backend)
    if args.preflight:
        pipeline.check(job, warn=warn)
    if job.spec.splits is not None:
        from anylaunch.launch import splits

        # The same command again resumes its unfinished run (e.g. after a crash mid-submit).
        return splits.launch(job, check=False, key=splits.run_key(job)).id
    store = Store()
    return watch.Job(store.get(pipeline.submit(job, store).id), store)


def started(what: watch.Job | str) -> dict[str, Any]:
    """What `run --detach --json` prints: the job, or the run of splits."""
    if isinstance(what, str):
        from anylaunch.observe import runs

        return runs.load(what).to_json()
    return what.record.summary()


# -- checks ---------------------------------------------------------------------------


def preflight(args: inputs.PreflightArgs) -> dict[str, Any]:
    from anylaunch import api
    from anylaunch.backends.checks import failed

    checks = api.checks(load(args), args.backend, deep=True)
    checks_json = [c.to_json() for c in checks]
    return {"id": None, "kind": "preflight", "checks": checks_json, "ok": not failed(checks)}


# -- jobs -----------------------------------------------------------------------------


def ps(args: inputs.PsArgs) -> list[dict[str, Any]]:
    return job_list(args.limit, args.states, args.backend)


def job_list(limit: int | None, states: Sequence[str], backend: str | None) -> list[dict[str, Any]]:
    """`ps` for arguments already checked (`ps`'s model, or `contract.quick` in the CLI)."""
    from anylaunch.state import State

    records = watch.jobs(limit=limit, states=[State(s) for s in states], backend=backend)
    return [r.summary() for r in records]


def status(args: inputs.RunOrJobRef) -> dict[str, Any]:
    """A job's summary, events and reports; or, for a run id, the run's splits."""
    return job_status(args.id)


def job_status(job_id: str) -> dict[str, Any]:
    """`status` of an id already checked (`status`'s model, or `contract.quick` in the CLI)."""
    from anylaunch.errors import JobNotFound
    from anylaunch.observe.reports import profile_reports
    from anylaunch.workflow.detect import is_workflow_id

    if is_workflow_id(job_id):
        from anylaunch.workflow import commands as workflows

        return workflows.status(job_id)
    try:
        job = watch.get(job_id)
    except JobNotFound:
        from anylaunch.observe import runs

        return runs.load(job_id).to_json()
    from anylaunch.jobfile.secrets import mask_data

    job.status()
    attempts = [a.to_json() for a in job.attempts()]
    summary = {**job.record.summary(), "events": job.events(), "attempts": attempts}
    reports = profile_reports(job.record)
    if reports:
        summary["reports"] = reports
    notifications = job.notifications()
    if notifications:
        summary["notifications"] = notifications
    return mask_data(summary, job.secrets())  # a backend's detail may quote the program


def logs(args: inputs.LogsArgs) -> dict[str, Any]:
    """The output from offset `since` on (the last `tail` lines of it, when asked).

    Offsets count characters of one log: with several nodes, whose lines are grouped by
    node, an offset into the joined text would skip lines written later by an earlier
    node, so following a multi-node job from an offset needs `node`.
    """
    job = watch.get(args.job_id)
    whole = job.logs(node=args.node)
    if args.since and args.node is None:
        sources = watch.log_sources(job.record)
        if len(sources) > 1:
            raise UsageError(
                f"since: job {job.id} has {len(sources)} node logs — pass node as well"
            )
    text = whole[args.since :]
    if args.tail is not None:
        lines = text.splitlines(keepends=True)
        text = "".join(lines[-args.tail :] if args.tail else [])
    return {"id": job.id, "kind": "logs", "node": args.node, "text": text, "offset": len(whole)}


def wait(args: inputs.WaitArgs) -> dict[str, Any]:
    """Block up to `timeout_s` for the job to end; its summary either way."""
    job = watch.get(args.job_id)
    job.wait(timeout=args.timeout_s)
    return job.record.summary()


def diagnose(args: inputs.JobRef) -> dict[str, Any]:
    job = watch.get(args.job_id)
    return job.diagnose().to_json(job.id)


def cancel(args: inputs.CancelArgs, *, note: Note | None = None) -> Any:
    """Cancel each job and wait until it stopped: one summary, or a list for several."""
    from anylaunch.workflow import commands as workflows

    results = []
    for job_id in args.job_ids:
        if workflows.is_workflow_id(job_id):
            results.append(workflows.cancel(job_id))
            continue
        job = watch.get(job_id)
        state = job.cancel()
        results.append(job.record.summary())
        if note is not None:
            note(f"{job.id} {state.value}")
    return results if len(results) > 1 else results[0]


# -- runs -----------------------------------------------------------------------------


def retry_failed(args: inputs.RetryArgs, *, note: Note | None = None) -> tuple[RunView, bool]:
    """Resubmit a run's failed splits (and any a crash left unsubmitted) with their split
    ids, saying why each failed; the run, and whether anything was submitted."""
    from anylaunch.launch import retry
    from anylaunch.observe import runs

    say = note or (lambda _text: None)
    view = runs.load(args.run_id)
    resumed = retry.resume_unsent(view)
    if resumed:
        say(f"run {view.id}: submitted splits {resumed}, left unsubmitted")
        view = runs.load(view.id)
    failed = view.failed()
    if not failed:
        if not resumed:
            say(f"run {view.id}: no failed split to retry ({view.state.value})")
        return view, bool(resumed)
    for split_id in failed:
        attempt = view.splits[split_id][-1]
        result = watch.get(attempt.id).diagnose()
        say(f"split {split_id} (job {attempt.id}): {result.code}: {result.cause}")
    retry.retry_failed(view)
    return runs.load(view.id), True


# -- Lepton workspace -----------------------------------------------------------------


def lepton_shapes(args: inputs.NodeGroupArgs) -> dict[str, Any]:
    """The workspace's resource shapes by id (what `lepton.resource_shape` takes)."""
    from anylaunch.sdk.lepton_sdk import LeptonSDK

    return LeptonSDK().list_resource_shapes(args.node_group)


def lepton_volumes(args: inputs.NodeGroupArgs) -> list[dict[str, Any]]:
    """The shared volumes of the workspace's node groups (what `mounts` can name)."""
    from anylaunch.sdk.lepton_sdk import LeptonSDK

    return LeptonSDK().get_volumes(args.node_group)


# -- a running job's nodes ------------------------------------------------------------


def stack(args: inputs.StackArgs) -> dict[str, Any]:
    """The Python stack of every rank (of one node), by rank, secrets masked."""
    from anylaunch.observe import live

    return live.stacks(args.job_id, args.node)


def exec_command(args: inputs.ExecArgs) -> dict[str, Any]:
    """A command run on one node in its environment, with no input; its output, masked."""
    from anylaunch.observe import live

    return live.exec_capture(args.job_id, args.node, args.command, args.timeout_s)


def shell(args: inputs.ShellArgs) -> dict[str, Any]:
    """A shell on one node under a pseudo-terminal, fed `input`: what it showed, masked."""
    from anylaunch.observe import live

    return live.shell_transcript(args.job_id, args.node, args.input, args.timeout_s)


def forward(args: inputs.ForwardArgs) -> dict[str, Any]:
    """Serve a node's port on 127.0.0.1 from this process for `seconds`; where it is."""
    import time

    from anylaunch.observe.relay import Forward

    opened = Forward(args.job_id, args.node, args.port, args.local_port)
    until = None
    if not opened.here:
        opened.start(stop_after=args.seconds)
        until = time.time() + args.seconds
    return forwarded(opened, until)


def forwarded(opened: Any, until: float | None) -> dict[str, Any]:
    """What `forward --json` prints once the port is served."""
    return {
        "id": opened.job_id,
        "kind": "forward",
        "node": opened.node,
        "port": opened.port,
        "local_port": opened.local_port,
        "url": opened.url,
        "via": opened.relay.via,
        "relayed": not opened.here,
        "until": until,
    }
