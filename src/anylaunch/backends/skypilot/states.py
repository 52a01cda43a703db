"""SkyPilot's states -> anylaunch's `State`, and what each failure means.

Three native vocabularies meet here: the API server's launch request (provisioning),
a cluster job's status (`sky queue`) and a managed job's status (`sky jobs queue`).
RECOVERING is not terminal: a managed spot job is being brought back after a
preemption. FAILED_SETUP, FAILED_NO_RESOURCE and FAILED_PRECHECKS each get their own
diagnosis, because each has a different fix: `detail` writes the status first in the
job's detail, which anylaunch.observe.diagnose reads as evidence.
"""

from __future__ import annotations

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


# What each native failure status means, in SkyPilot's words (sky/skylet/job_lib.py,
# sky/jobs/state.py). The class is the shared classifier's: the status is evidence.
CAUSES = {
    "FAILED": "the job fails due to the user code (the training command exited with an error)",
    "FAILED_SETUP": "skypilot.setup (or the runtime setup on the node) failed before the command ran",
    "FAILED_DRIVER": "SkyPilot's job driver on the cluster died (node out of memory or lost)",
    "FAILED_NO_RESOURCE": "no cloud capacity for the requested resources in any allowed region or zone",
    "FAILED_PRECHECKS": "SkyPilot refused the job before launching: no feasible resources, a disabled"
    " cloud or missing credentials",
    "FAILED_CONTROLLER": "the managed-jobs controller failed unexpectedly",
}


def detail(native: str, recoveries: int = 0, reason: str | None = None) -> str:
    """`FAILED_NO_RESOURCE: <cause> (after 2 recoveries)`, the text `status` shows."""
    text = native
    if reason:
        text += f": {' '.join(reason.split())[:300]}"
    elif native in CAUSES:
        text += f": {CAUSES[native]}"
    if recoveries:
        text += f" (after {recoveries} recover{'y' if recoveries == 1 else 'ies'})"
    return text
