"""Announcing a job's end from the submitting host (`notify:` in the job file).

Every process that sees jobs ended announces the ones not yet announced: a local job's
supervisor at the job's end (the moment a user wants to hear of it, even with no command
running), and every command that polls (`ps`, `status`, `run`'s wait, the dashboard) for
what the supervisor could not do (it was killed, the receiver was down). A Slurm job
announces itself at its end, inside its allocation; its receipt in the job's folder,
read here at the next poll, records that it did, so nothing is sent twice.

Each target is claimed in the store before it is sent (`Store.claim_notification`), so
two commands seeing one end make one announcement. A sender that dies between sending
and recording leaves the claim to be taken again: the message is sent again with the
same idempotency key — at least once, and never lost silently.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from anylaunch.errors import AnylaunchError
from anylaunch.jobfile.secrets import mask, secret_values
from anylaunch.state import State
from anylaunch.store import JobRecord, Store

if TYPE_CHECKING:
    from anylaunch.observe.diagnose.engine import Diagnosis
    from anylaunch.store.notifications import Claim

# Tries in one go by a process that waits for nothing else (the supervisor at the job's
# end); a command that polls tries once, and the store's backoff spaces its next tries.
SUPERVISOR_TRIES = 4
# How often a patient sender looks whether another process's try has ended.
_HELD_CHECK_S = 0.2


def announce(
    store: Store,
    records: Sequence[JobRecord],
    diagnose: Callable[[JobRecord], Diagnosis | None],
    *,
    tries: int = 1,
    by: str = "command",
) -> None:
    """Announce every ended job of `records` whose announcements are not all made.

    With `tries` above one the caller may wait (a local job's supervisor): it waits out
    a backoff a command left, then tries that many times. A command tries once, and a
    receiver's trouble never fails the command: the store keeps the error.
    """
    ended = [r.id for r in records if r.state.terminal]
    for job_id in store.pending_notifications(ended):
        _announce(store, store.get(job_id), diagnose, tries, by)


def _announce(
    store: Store,
    record: JobRecord,
    diagnose: Callable[[JobRecord], Diagnosis | None],
    tries: int,
    by: str,
) -> None:
    # The sender brings urllib and http.client: paid only when a job has something to say.
    from anylaunch.node.runtime import notify as wire

    state = record.state.value
    secrets = secret_values(record.plan.get("secret_env", []))
    payload: dict[str, Any] | None = None
    for index, target in enumerate(record.spec.get("notify") or []):
        claim = _claim(store, record.id, index, patient=tries > 1)
        if claim is None:
            continue
        time.sleep(claim.wait_s)
        try:
            receipt = wire.read_receipt(record.job_dir, index)
            if receipt is not None:  # the job announced its own end
                store.notification_sent(claim, receipt["state"], by="job")
                continue
            if state not in target.get("on", []):
                store.notification_skipped(claim, state)
                continue
            if payload is None:
                payload = wire.message(facts(record, diagnose), lambda t: mask(t, secrets))
            key = wire.key(record.id, index, state)
            error = wire.send_with_backoff(wire_target(target), payload, key, os.environ, tries)
        except (AnylaunchError, OSError) as exc:
            # The message could not be made (the backend, asked for its word on the
            # end, did not answer; a log could not be read): tried again later.
            error = f"the message could not be made: {exc}"
        except BaseException:
            store.notification_failed(claim, state, "the sender stopped before it was sent")
            raise
        if error is None:
            store.notification_sent(claim, state, by=by)
        else:
            store.notification_failed(claim, state, mask(error, secrets))


def _claim(store: Store, job_id: str, target: int, *, patient: bool) -> Claim | None:
    """The target's claim for this process, or None when there is nothing to send.

    A patient sender (a local job's supervisor) that finds another process sending waits
    for that try's outcome instead of going away: the other is a command that tries
    once (an attached `run` polling the same end), and if the receiver refuses it, the
    announcement would otherwise wait for the next command, which may never come. The
    wait is as long as one try (a message made, one send); the supervisor bounds it.
    """
    claim = store.claim_notification(job_id, target, patient=patient)
    # A patient claim fails only while another live process holds the target: until
    # the announcement is made for good, that one's try ended unmade or still runs.
    while claim is None and patient and store.notification_open(job_id, target):
        time.sleep(_HELD_CHECK_S)
        claim = store.claim_notification(job_id, target, patient=True)
    return claim


def wire_target(target: Mapping[str, Any]) -> dict[str, Any]:
    """A target of the stored spec as the sender takes it: the URL by its variable."""
    out: dict[str, Any] = {"on": list(target.get("on", []))}
    url = str(target.get("url") or "")
    if url:
        out["url_env"] = url.removeprefix("${").removesuffix("}")
    if target.get("command"):
        out["command"] = target["command"]
    return out


def facts(record: JobRecord, diagnose: Callable[[JobRecord], Diagnosis | None]) -> dict[str, Any]:
    """What the message says of the job; on failure, why and what to do."""
    env = record.spec.get("env") or {}
    out: dict[str, Any] = {
        "id": record.id,
        "name": record.name,
        "state": record.state.value,
        "backend": record.backend,
        "attempt": env.get("ANYLAUNCH_ATTEMPT") or 1,
        "duration_s": max(0.0, record.updated_at - record.created_at),
        "exit_code": record.exit_code,
    }
    if record.state in (State.FAILED, State.UNKNOWN):
        found = diagnose(record)
        if found is not None:
            out["diagnosis"] = {
                "class": f"{found.code} ({found.err_class})",
                "cause": found.cause,
                "fix": found.suggestion,
                "evidence": [e.get("text", "") for e in found.evidence[:3]],
            }
        elif record.detail:
            out["note"] = record.detail
    return out
