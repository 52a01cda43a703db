"""The emulated workspace: its jobs, secrets and image pull secrets, and the job loop.

One lock guards everything; HTTP handlers and the loop thread take it briefly. The loop
advances every job about ten times a second and archives finished jobs after their
`ttl_seconds_after_finished`.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lepton_emulator import validate
from lepton_emulator.faults import FaultBook
from lepton_emulator.jobs import TERMINAL, JobRun, suffix
from lepton_emulator.network import Endpoint

ALIVE_HIDDEN = frozenset({"Deleted", "Archived"})


class World:
    def __init__(
        self,
        workspace: str,
        tokens: set[str],
        state_dir: Path,
        seed: int | None = None,
        outside: Sequence[Endpoint] = (),
    ):
        self.workspace = workspace
        self.outside = tuple(outside)  # what a job reaches beyond its own network
        self.tokens = tokens
        self.state_dir = state_dir
        self.volumes = state_dir / "volumes"  # the node groups' shared volumes, on disk
        self.faults = FaultBook(seed)
        self.lock = threading.RLock()
        self.jobs: dict[str, JobRun] = {}
        self.secrets: dict[str, str] = {}
        self.pull_secrets: dict[str, dict[str, Any]] = {}
        self.calls: Counter[str] = Counter()  # "METHOD /route/template" -> requests served
        # Each job's workers get loopback addresses from its slot (sandbox.job_addresses).
        # With namespaces those live in the job's own network (network.py), where its
        # MASTER_PORT is its own too. Without them (no root) every job shares this host's
        # 127.0.0.0/8 with the emulators of other checkouts: starting at a random slot keeps
        # their live jobs' addresses apart, though not their MASTER_PORT (torch's TCPStore
        # listens on every address), so there two multi-replica jobs at once meet on 29400.
        self._slots = random.randrange(37_500)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="lepton-emulator-loop", daemon=True)

    def start(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._thread.start()

    def shutdown(self) -> None:
        """End every replica this emulator started; nothing outlives it."""
        self._stop.set()
        with self.lock:
            for job in self.jobs.values():
                job.end()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.wait(0.1):
            with self.lock:
                for job in list(self.jobs.values()):
                    job.advance()
                    self._maybe_archive(job)

    def _maybe_archive(self, job: JobRun) -> None:
        ttl = job.spec.get("ttl_seconds_after_finished")
        finished = job.state in ("Completed", "Failed") and job.completion_ms
        if finished and ttl is not None and time.time() * 1000 - finished >= int(ttl) * 1000:
            job.move("Archived")

    def add_faults(self, faults: list[Any]) -> None:
        """Switch faults on; a job fault applies to the live jobs it matches, too."""
        with self.lock:
            start = self.faults.add(faults)
            for job in self.jobs.values():
                if job.state not in TERMINAL:
                    job.faults += self.faults.for_job(job.name, start)

    # -- jobs -----------------------------------------------------------------------

    def create(self, body: dict[str, Any], owner: str) -> JobRun:
        """Validate, fill defaults, and queue the job; raises validate.Invalid on bad input."""
        with self.lock:
            validate.check_job(body, lambda name: name in self.secrets)
            metadata = dict(body["metadata"])
            name = metadata.get("id") or metadata["name"]
            job_id = f"{name[:31]}-{suffix(4)}"
            metadata.update(
                id=job_id,
                name=name,
                created_at=int(time.time() * 1000),
                owner=owner,
                created_by=owner,
                version=1,
            )
            spec = {
                "container": {},
                "completions": 1,
                "parallelism": 1,
                "envs": [],
                "mounts": [],
                "image_pull_secrets": [],
                "ttl_seconds_after_finished": 600,
                **(body.get("spec") or {}),
            }
            self._slots += 1
            job = JobRun(
                id=job_id,
                name=name,
                owner=owner,
                workspace=self.workspace,
                metadata=metadata,
                spec=spec,
                faults=self.faults.for_job(name),
                slot=self._slots,
                root=self.state_dir / "jobs" / job_id,
                volumes=self.volumes,
                secrets=dict(self.secrets),
                outside=self.outside,
                pull_secret_ok=any(
                    self.pull_secrets.get(n, {}).get("registry_server") == "nvcr.io"
                    for n in spec.get("image_pull_secrets") or []
                ),
            )
            job.root.mkdir(parents=True, exist_ok=True)
            job.created_ms = metadata["created_at"]
            job.event("Normal", "Created", f"Job {job_id} created")
            self.jobs[job_id] = job
            return job

    def get(self, job_id: str, mode: str = "alive_and_archive") -> JobRun | None:
        job = self.jobs.get(job_id)
        if job is None or not _visible(job, mode):
            return None
        return job

    def list(self, mode: str) -> list[JobRun]:
        return sorted(
            (j for j in self.jobs.values() if _visible(j, mode)), key=lambda j: j.created_ms
        )

    def delete(self, job: JobRun) -> None:
        job.move("Deleting")
        job.end()
        job.move("Deleted")


def _visible(job: JobRun, mode: str) -> bool:
    archived = job.state in ALIVE_HIDDEN
    if mode == "alive_only":
        return not archived
    if mode == "archive_only":
        return archived
    return True
