"""SkyPilot's states -> DESIGN's states, and what each failure means (R-X6).

Three native vocabularies meet here: the API server's launch request (provisioning),
a cluster job's status (`sky queue`) and a managed job's status (`sky jobs queue`).
RECOVERING is not terminal: a managed spot job is being brought back after a
preemption. FAILED_SETUP, FAILED_NO_RESOURCE and FAILED_PRECHECKS each get their own
diagnosis, because each has a different fix.
"""

from __future__ import annotations

from dataclasses import dataclass

from anylaunch.state import State

REQUEST = {
    "PENDING": State.STARTING,
    "WAITING": State.STARTING,
    "RUNNING": State.STARTING,  # provisioning, runtime setup, `setup:`
    "SUCCEEDED": State.RUNNING,  # the job was handed to the cluster
    "FAILED": State.FAILED,
    "CANCELLED": State.CANCELLED,
}

CLUSTER_JOB = {
    "INIT": State.PENDING,
    "PENDING": State.PENDING,
    "SETTING_UP": State.STARTING,
    "RUNNING": State.RUNNING,
    "SUCCEEDED": State.SUCCEEDED,
    "FAILED": State.FAILED,
    "FAILED_SETUP": State.FAILED,
    "FAILED_DRIVER": State.FAILED,
    "CANCELLED": State.CANCELLED,
}

MANAGED_JOB = {
    "PENDING": State.PENDING,
    "SUBMITTED": State.PENDING,
    "STARTING": State.STARTING,
    "RUNNING": State.RUNNING,
    "WINDING_DOWN": State.RUNNING,
    "RECOVERING": State.RUNNING,  # preempted; SkyPilot is relaunching: not terminal
    "CANCELLING": State.RUNNING,
    "SUCCEEDED": State.SUCCEEDED,
    "CANCELLED": State.CANCELLED,
    "FAILED": State.FAILED,
    "FAILED_SETUP": State.FAILED,
    "FAILED_PRECHECKS": State.FAILED,
    "FAILED_NO_RESOURCE": State.FAILED,
    "FAILED_CONTROLLER": State.FAILED,
}


@dataclass(frozen=True)
class Diagnosis:
    """The contract's diagnosis fields for one native failure status."""

    code: str
    err_class: str  # ERR_PROGRAM: the job's own code; ERR_INFRA: the platform
    retryable: bool
    cause: str
    suggestion: str


DIAGNOSES = {
    "FAILED": Diagnosis(
        "PROGRAM_FAILED",
        "ERR_PROGRAM",
        False,
        "the training command exited with an error",
        "read the job's log (anylaunch logs JOB --tail 100) for the first error",
    ),
    "FAILED_SETUP": Diagnosis(
        "SETUP_FAILED",
        "ERR_PROGRAM",
        False,
        "skypilot.setup (or the runtime setup on the node) failed before the command ran",
        "run the setup commands by hand in the image; check package names and versions",
    ),
    "FAILED_DRIVER": Diagnosis(
        "DRIVER_FAILED",
        "ERR_INFRA",
        True,
        "SkyPilot's job driver on the cluster died (node out of memory or lost)",
        "retry; if it repeats, use a larger instance (skypilot.memory)",
    ),
    "FAILED_NO_RESOURCE": Diagnosis(
        "NO_CAPACITY",
        "ERR_INFRA",
        True,
        "no cloud capacity for the requested resources in any allowed region or zone",
        "allow more regions (drop skypilot.region/zone), add any_of candidates, or retry later",
    ),
    "FAILED_PRECHECKS": Diagnosis(
        "PRECHECKS_FAILED",
        "ERR_CONFIG",
        False,
        "SkyPilot refused the job before launching: no feasible resources, a disabled"
        " cloud or missing credentials",
        "run `sky check` and `sky show-gpus <accelerator>`; fix cloud, region or accelerators",
    ),
    "FAILED_CONTROLLER": Diagnosis(
        "CONTROLLER_FAILED",
        "ERR_INFRA",
        True,
        "the managed-jobs controller failed unexpectedly",
        "retry; `sky jobs logs --controller JOB_ID` shows the controller's error",
    ),
}


def diagnosis(native: str) -> Diagnosis | None:
    return DIAGNOSES.get(native)


def detail(native: str, recoveries: int = 0, reason: str | None = None) -> str:
    """`FAILED_NO_RESOURCE: <cause> (after 2 recoveries)`, the text `status` shows."""
    found = DIAGNOSES.get(native)
    text = native
    if reason:
        text += f": {' '.join(reason.split())[:300]}"
    elif found and native.startswith("FAILED"):
        text += f": {found.cause}"
    if recoveries:
        text += f" (after {recoveries} recover{'y' if recoveries == 1 else 'ies'})"
    return text
