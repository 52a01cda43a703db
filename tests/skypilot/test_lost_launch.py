"""A SkyPilot launch whose answer is lost stays UNKNOWN, and a later poll adopts it.

The real API server of the devstack gets the launch; a loopback relay in front of it
passes every request on but drops the connection instead of returning the launch's
answer, as a broken network would. Nothing is mocked: the request is really queued, and
anylaunch must find it (by the job id its task carries) instead of calling the job
failed or launching it a second time.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading

import pytest
from test_e2e_slurm import job_file, wait_for

from conftest import needs_sky

pytestmark = [needs_sky, pytest.mark.timeout(600)]


class LossyRelay:
    """127.0.0.1:port -> the API server. The first `POST /launch` reaches the server, but
    its answer never comes back: the client's connection is closed instead. (The client
    keeps connections alive, so requests are found in the stream, not per connection.)"""

    def __init__(self, upstream: int, lose: bytes = b"POST /launch") -> None:
        self.upstream, self.lose = upstream, lose
        self.connections = self.lost = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        server = socket.create_connection(("127.0.0.1", self.upstream))
        losing = threading.Event()

        def requests() -> None:  # client -> server, watching for the launch
            with contextlib.suppress(OSError):
                while data := client.recv(65536):
                    if self.lose in data and self.lost == 0:
                        self.lost += 1
                        losing.set()
                    server.sendall(data)

        threading.Thread(target=requests, daemon=True).start()
        with contextlib.suppress(OSError):
            while data := server.recv(65536):
                if losing.is_set():  # the server answered the launch: drop the answer
                    break
                client.sendall(data)
        for end in (client, server):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()

    def close(self) -> None:
        self.sock.close()


def _launches_of(skystack: dict[str, str], job_id: str) -> int:
    """How many launch requests on the API server carry this job (asked with the SDK)."""
    code = (
        "import json, sky; rows = sky.api_status(all_status=True);"
        "print(json.dumps([r.request_body for r in rows if r.name in "
        "('sky.launch', 'sky.jobs.launch')]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **skystack},
        capture_output=True,
        text=True,
        timeout=120,
    )
    bodies = json.loads(out.stdout.strip().splitlines()[-1])
    return sum(f"ANYLAUNCH_JOB_ID={job_id}" in body for body in bodies)


# A SkyPilot launch takes minutes on the devstack: run with the other long rehearsals.
@pytest.mark.slow
def test_a_launch_whose_answer_is_lost_is_adopted_not_failed_and_runs_once(
    cli, skystack, cluster, tmp_path
):
    path = job_file(
        tmp_path / "job.yaml",
        cluster,
        """
        name: lost-launch
        launcher: none
        command: [bash, -c, 'echo ran-once']
        """,
    )
    relay = LossyRelay(int(skystack["DEVSTACK_SKY_API_PORT"]))
    try:
        lossy = {**skystack, "SKYPILOT_API_SERVER_ENDPOINT": f"http://127.0.0.1:{relay.port}"}
        sent = cli("run", str(path), "--detach", "--json", env=lossy, timeout=300)
    finally:
        relay.close()
    assert relay.connections and relay.lost == 1, sent.err
    job = sent.json()
    assert job["state"] == "UNKNOWN", job  # not FAILED: the server may hold the launch
    assert job["native_id"] in (None, "")

    def settled():
        view = cli("status", job["id"], "--json", env=skystack, timeout=300).json()
        return view if view["state"] in ("SUCCEEDED", "FAILED", "CANCELLED") else None

    done = wait_for(settled, "the adopted launch to finish", timeout=480)
    assert done["state"] == "SUCCEEDED", done
    assert done["native_id"] == f"{cluster}/1"
    logs = cli("logs", job["id"], "--node", "0", env=skystack).out
    assert logs.count("ran-once") == 1
    assert _launches_of(skystack, job["id"]) == 1  # adopted, never launched again
