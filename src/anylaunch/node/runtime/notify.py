"""Announcing a job's end: a message a Slack incoming webhook accepts, POSTed to a
webhook or written on a command's standard input.

Standard library only: a Slurm job runs this at its own end, inside its allocation
(nothing of ours has to stay on the login node), and the submitting side runs the same
code for every other job. The message is Slack's documented payload, `text` (also the
notification's fallback) and one `blocks` section; the receiver gets an idempotency key
(the `Idempotency-Key` header, or ANYLAUNCH_NOTIFY_KEY for a command), the same on every
try and from every sender, so a message sent twice after a crash can be told apart.

    python3 -I -S anylaunch_job.pyz notify --job-id ID --job-dir DIR --rc RC --started EPOCH
        --facts JSON --targets JSON

writes one receipt per target it delivered (`<job dir>/notify/<target>.json`): the
submitting side reads it at its next poll and records the announcement as made instead
of making it again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Any

RECEIPTS = "notify"
KEY_ENV = "ANYLAUNCH_NOTIFY_KEY"
WEBHOOK_TIMEOUT_S = 10.0
COMMAND_TIMEOUT_S = 30.0
# Slack truncates nothing for us: a section's text over 3000 characters is refused.
_SECTION_MAX = 3000
_ICONS = {"SUCCEEDED": ":white_check_mark:", "FAILED": ":x:", "CANCELLED": ":no_entry_sign:"}


def key(job_id: str, target: int, state: str) -> str:
    """The same announcement's key wherever it is sent from."""
    return f"anylaunch-{job_id}-{target}-{state}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "duration unknown"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


def message(facts: Mapping[str, Any], mask: Callable[[str], str]) -> dict[str, Any]:
    """The payload for one job's end; every text goes through `mask` (the job's secrets)."""
    state = str(facts["state"])
    head = (
        f"{state}: job {facts['name']} ({facts['id']}) on {facts['backend']},"
        f" attempt {facts.get('attempt') or 1}, {_duration(facts.get('duration_s'))}"
    )
    if facts.get("exit_code") is not None:
        head += f", exit code {facts['exit_code']}"
    lines = [f"{_ICONS.get(state, ':grey_question:')} *{head}*"]
    diagnosis = facts.get("diagnosis")
    if diagnosis:
        lines.append(f"*{diagnosis['class']}*: {diagnosis['cause']}")
        lines.append(f"Fix: {diagnosis['fix']}")
        evidence = [str(e) for e in diagnosis.get("evidence") or []]
        if evidence:
            lines.append("```" + "\n".join(evidence) + "```")
    elif facts.get("note"):
        lines.append(str(facts["note"]))
    body = mask("\n".join(lines))
    if len(body) > _SECTION_MAX:
        body = body[: _SECTION_MAX - 4] + "...`" if "```" in body else body[:_SECTION_MAX]
    text = mask(head if not diagnosis else f"{head} — {diagnosis['class']}: {diagnosis['cause']}")
    return {"text": text, "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": body}}]}


def send(
    target: Mapping[str, Any], payload: Mapping[str, Any], idem: str, environ: Mapping[str, str]
) -> str | None:
    """One try; None when the receiver took it, else why not (never the URL)."""
    data = json.dumps(payload).encode()
    if target.get("command"):
        try:
            done = subprocess.run(
                ["bash", "-c", str(target["command"])],
                input=data,
                env={**environ, KEY_ENV: idem},
                capture_output=True,
                timeout=COMMAND_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"command: {type(exc).__name__}"
        return None if done.returncode == 0 else f"command exited with {done.returncode}"
    name = str(target.get("url_env") or "")
    url = environ.get(name)
    if not url:
        return f"{name} is not set where the job ended: export it there"
    request = urllib.request.Request(
        url,
        data=data,
        headers={"Content-Type": "application/json", "Idempotency-Key": idem},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=WEBHOOK_TIMEOUT_S) as answer:
            answer.read()
    except urllib.error.HTTPError as exc:
        return f"webhook answered HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"webhook unreachable: {type(reason).__name__}"
    return None


def send_with_backoff(
    target: Mapping[str, Any],
    payload: Mapping[str, Any],
    idem: str,
    environ: Mapping[str, str],
    tries: int,
    first_wait_s: float = 1.0,
) -> str | None:
    """`send` until it is taken or `tries` are spent, the wait doubling; the last error."""
    error = None
    for attempt in range(tries):
        if attempt:
            time.sleep(first_wait_s * 2 ** (attempt - 1))
        error = send(target, payload, idem, environ)
        if error is None:
            return None
    return error


def receipt_path(job_dir: str, target: int) -> str:
    return os.path.join(job_dir, RECEIPTS, f"{target}.json")


def write_receipt(job_dir: str, target: int, state: str, idem: str) -> None:
    """Written after the receiver took the message, atomically: a receipt is never half."""
    path = receipt_path(job_dir, target)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w") as handle:
        json.dump({"state": state, "key": idem, "sent_at": time.time()}, handle)
    os.replace(tmp, path)


def read_receipt(job_dir: str, target: int) -> dict[str, Any] | None:
    """The job's own word that it delivered target `target`: untrusted, so only a
    well-formed receipt counts."""
    try:
        with open(receipt_path(job_dir, target)) as handle:
            found = json.load(handle)
    except (OSError, ValueError):
        return None
    if isinstance(found, dict) and isinstance(found.get("state"), str):
        return found
    return None


def _last_lines(job_dir: str, lines: int = 3, nodes: int = 4) -> list[str]:
    """The last lines of the first nodes' logs: what a failed job printed last, as
    evidence where no diagnosis can run (read as bytes: a job may print anything)."""
    out: list[str] = []
    for node in range(nodes):
        try:
            with open(os.path.join(job_dir, "logs", f"node-{node}.log"), "rb") as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - 4096))
                tail = handle.read().decode("utf-8", "replace").splitlines()
        except OSError:
            break
        kept = [line.strip()[:300] for line in tail if line.strip()][-lines:]
        out += [f"[node {node}] {line}" for line in kept]
    return out


def in_job(argv: Sequence[str]) -> int:
    """A Slurm job's own announcement, by its batch shell at its end."""
    args = dict(zip(argv[0::2], argv[1::2]))  # noqa: B905 (Python 3.8 on nodes)
    job_dir, rc = args["--job-dir"], int(args["--rc"])
    facts = json.loads(args["--facts"])
    targets = json.loads(args["--targets"])
    state = "SUCCEEDED" if rc == 0 else "FAILED"
    started = float(args.get("--started") or 0)
    facts.update(
        id=args["--job-id"],
        state=state,
        exit_code=rc,
        duration_s=time.time() - started if started else None,
        attempt=os.environ.get("ANYLAUNCH_ATTEMPT") or 1,
    )
    from .live import mask, secret_values  # the masking of what a live job prints

    names = [*facts.pop("secrets", []), *(t.get("url_env", "") for t in targets)]
    hidden = secret_values(dict(os.environ), names, facts.pop("secret_pattern", None))
    if state == "FAILED":  # diagnosis runs where anylaunch is installed: its evidence here
        last = "\n".join(_last_lines(job_dir))
        facts["note"] = f"Why: anylaunch diagnose {facts['id']}" + (
            f"\nLast lines:\n```{last}```" if last else ""
        )
    payload = message(facts, lambda text: mask(text, hidden))
    for index, target in enumerate(targets):
        if state not in target.get("on", []):
            continue
        idem = key(str(facts["id"]), index, state)
        error = send_with_backoff(target, payload, idem, os.environ, tries=4)
        if error is None:
            write_receipt(job_dir, index, state, idem)
        else:  # the submitting side tries again at its next poll
            sys.stderr.write(f"anylaunch: notify target {index}: {mask(error, hidden)}\n")
    return 0
