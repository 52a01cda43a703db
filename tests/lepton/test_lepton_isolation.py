"""A replica is a container: it runs as root, yet reaches nothing of the machine the
emulator runs on, nor another job. Each test runs the attack from inside a real replica
(programs/breakout.py, or the job body itself) against a real `lepton-emulator` process
started as the devstack starts it, its token in its environment."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from lepton_helpers import NODE_GROUP, PERMITTED, PROGRAMS, wait_until

from lepton_emulator import network, sandbox

pytestmark = pytest.mark.skipif(
    not (sandbox.namespaces_work() and network.works()),
    reason="needs namespaces, mount and nsenter (root) for replica roots",
)
GROUP = f"ng-{NODE_GROUP}-7x2k"


def sha(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


class Running:
    """A `lepton-emulator` process of its own and a client of its workspace."""

    def __init__(self, state: Path) -> None:
        self.token = "emu-" + secrets.token_hex(12)
        self.state = state
        command = Path(sys.executable).parent / "lepton-emulator"
        self.proc = subprocess.Popen(
            [str(command), "--port", "0", "--state-dir", str(state)],
            env={**os.environ, "LEPTON_EMULATOR_TOKEN": self.token},
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        self.url = json.loads(self.proc.stdout.readline())["url"]
        self.port = int(self.url.split(":")[2].split("/")[0])
        self.http = httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=30
        )

    def create(self, name: str, command: list[str], **spec) -> httpx.Response:
        body = {
            "metadata": {"id": name},
            "spec": {
                "resource_shape": "cpu.small",
                "container": {"image": "python:3.11", "command": command},
                **spec,
            },
        }
        return self.http.post("/jobs", json=body)

    def state_of(self, job_id: str) -> str:
        return str(self.http.get(f"/jobs/{job_id}").json()["status"]["state"])

    def run(self, name: str, command: list[str], **spec) -> str:
        """Create a job, wait for its end, return what its replicas printed."""
        created = self.create(name, command, **spec)
        assert created.status_code == 200, created.text
        job_id = created.json()["metadata"]["id"]
        wait_until(
            lambda: self.state_of(job_id) in ("Completed", "Failed"),
            timeout=120,
            what=f"job {name} to end",
        )
        return self.logs(job_id)

    def logs(self, job_id: str) -> str:
        found = self.http.get("/logs", params={"job": job_id, "limit": 5000}).json()
        values = [v for stream in found["data"]["result"] for v in stream["values"]]
        return "\n".join(text for _, text in sorted(values, key=lambda v: int(v[0])))

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    emu = Running(tmp_path_factory.mktemp("isolation") / "state")
    yield emu
    emu.stop()


def test_a_replica_reaches_neither_the_hosts_files_nor_secrets_nor_network_through_proc(
    running, tmp_path
):
    host_only = tmp_path / "only-on-the-host"
    host_only.write_text("")
    team_key = "team-key-" + secrets.token_hex(16)
    wanted = [sha(running.token), sha(team_key)]
    if Path("/etc/shadow").exists():
        wanted.append(sha(Path("/etc/shadow").read_bytes()))
    assert running.http.post("/usersecrets", json=[{"name": "team", "value": team_key}]).is_success
    victim = running.create(
        "victim",
        ["sleep", "300"],
        envs=[{"name": "TEAM_KEY", "value_from": {"secret_name_ref": "team"}}],
    ).json()["metadata"]["id"]
    try:
        wait_until(lambda: running.state_of(victim) == "Running", what="the victim to run")
        probe = (PROGRAMS / "breakout.py").read_text()
        argv = [str(running.proc.pid), str(running.port), str(host_only), *wanted]
        text = running.run("attacker", ["python3", "-c", probe, *argv])
    finally:
        running.http.delete(f"/jobs/{victim}")
    assert "probe ran to its end" in text, text
    assert "FOUND" not in text, text
    # Only the replica's own processes are in its /proc (its shell, python3, sh -c).
    assert int(text.split("processes seen ", 1)[1].split()[0]) < 6, text


def test_a_replica_can_neither_mount_nor_enter_namespaces_nor_write_the_kernels_settings(
    running,
):
    text = running.run(
        "caps",
        [
            "sh",
            "-c",
            "grep CapEff /proc/self/status; mount -t tmpfs none /tmp 2>&1 || echo no-mount;"
            # Harmless writes if they got through: help text to the kernel log, and the
            # setting's own value back.
            " echo h > /proc/sysrq-trigger 2>&1 || echo no-sysrq;"
            " v=$(cat /proc/sys/kernel/sysrq); echo $v > /proc/sys/kernel/sysrq 2>&1 || echo no-sysctl",
        ],
    )
    cap_eff = int(text.split("CapEff:")[1].split()[0], 16)
    assert cap_eff & (1 << 21) == 0, text  # CAP_SYS_ADMIN: mount, setns, unshare
    assert cap_eff & (1 << 27) == 0, text  # CAP_MKNOD: a device node of the host's disk
    assert "no-mount" in text and "no-sysrq" in text and "no-sysctl" in text


def test_a_node_local_path_climbing_out_of_the_job_is_refused_at_create(running, tmp_path):
    mount = {"path": "/../../../../../../../..", "from": "node-local", "mount_path": "/host"}
    created = running.create("climb", ["ls", "/host"], mounts=[mount])
    assert created.status_code == 400, created.text
    assert created.json()["code"] == "ValidationError" and ".." in created.json()["message"]


def test_a_path_climbing_out_of_the_permitted_folder_is_refused_at_create(running):
    private = running.state / "volumes" / "lustre" / "private"
    private.mkdir(parents=True, exist_ok=True)
    (private / "other-teams-data").write_text("not yours")
    mount = {
        "path": f"/lustre/{PERMITTED}/../../../private",
        "from": "node-nfs:lustre",
        "mount_path": "/data",
    }
    created = running.create(
        "sneak",
        ["cat", "/data/other-teams-data"],
        mounts=[mount],
        affinity={"allowed_dedicated_node_groups": [GROUP]},
    )
    assert created.status_code == 400, created.text
    assert ".." in created.json()["message"]


def test_a_symlink_a_job_left_on_a_volume_does_not_mount_the_host(running, tmp_path):
    host_only = tmp_path / "only-on-the-host"
    host_only.write_text("")
    volume = {"path": f"/lustre/{PERMITTED}", "from": "node-nfs:lustre", "mount_path": "/mnt/v"}
    affinity = {"allowed_dedicated_node_groups": [GROUP]}
    left = running.run(
        "plant", ["sh", "-c", "ln -s / /mnt/v/escape && echo planted"],
        mounts=[volume], affinity=affinity,
    )  # fmt: skip
    assert "planted" in left
    through = {**volume, "path": f"/lustre/{PERMITTED}/escape", "mount_path": "/host"}
    created = running.create(
        "follow", ["sh", "-c", f"ls {host_only} && echo host-visible"],
        mounts=[through], affinity=affinity,
    )  # fmt: skip
    assert created.status_code == 200, created.text
    job_id = created.json()["metadata"]["id"]

    def failed_mount():
        events = running.http.get(f"/jobs/{job_id}/events").json()
        return [e for e in events if e["reason"] == "FailedMount"]

    events = wait_until(failed_mount, timeout=60, what="a FailedMount event")
    assert "escape" in events[0]["message"]
    assert "host-visible" not in running.logs(job_id)
    running.http.delete(f"/jobs/{job_id}")
