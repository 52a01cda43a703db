"""Each emulated job has a network of its own: its MASTER_PORT is its own, and it reaches
the endpoints the emulator relays (the S3 server) and nothing else of this machine."""

from __future__ import annotations

import http.server
import threading

import httpx
import pytest
from lepton_helpers import NODE_GROUP, PERMITTED, wait_until

from lepton_emulator import network
from lepton_emulator.server import Emulator

pytestmark = pytest.mark.skipif(
    not network.works(), reason="needs network namespaces and nsenter (root)"
)
GROUP = f"ng-{NODE_GROUP}-7x2k"
MOUNT = {"path": f"/lustre/{PERMITTED}", "from": "node-nfs:lustre", "mount_path": "/mnt/lustre"}

# Both workers meet on torch's TCPStore at worker-0:29400, as torchrun does with Lepton's
# MASTER_PORT. Worker 0 then keeps its store listening until the test says go, so the two
# jobs of the test certainly hold 29400 at the same moment.
STORE = """
import os, pathlib, time
from datetime import timedelta
import torch.distributed as dist
rank = int(os.environ["LEPTON_JOB_WORKER_INDEX"])
master = "worker-0." + os.environ["LEPTON_SUBDOMAIN"]
store = dist.TCPStore(master, 29400, 2, rank == 0, timeout=timedelta(seconds=600))
store.set(f"rank{rank}", os.environ["LEPTON_JOB_NAME"])
print("rank", rank, "met", store.get(f"rank{1 - rank}").decode(), flush=True)
if rank == 0:
    flags = pathlib.Path("/mnt/lustre")
    (flags / "listening").write_text("29400")
    for _ in range(6000):
        if (flags / "go").exists():
            break
        time.sleep(0.1)
store.set(f"done{rank}", "1")
store.wait([f"done{1 - rank}"])
"""


def client(emu: Emulator) -> httpx.Client:
    headers = {"Authorization": f"Bearer {emu.token}"}
    return httpx.Client(base_url=emu.url, headers=headers, timeout=30)


def create(emu: Emulator, image: str, command: list[str], **spec) -> str:
    job = {
        "metadata": {"id": "net"},
        "spec": {
            "resource_shape": "cpu.small",
            "container": {"image": image, "command": command},
            "affinity": {"allowed_dedicated_node_groups": [GROUP]},
            "mounts": [MOUNT],
            **spec,
        },
    }
    created = client(emu).post("/jobs", json=job)
    assert created.status_code == 200, created.text
    return created.json()["metadata"]["id"]


def ended(emu: Emulator, job_id: str) -> str | None:
    state = client(emu).get(f"/jobs/{job_id}").json()["status"]["state"]
    return state if state in ("Completed", "Failed") else None


def output(emu: Emulator, job_id: str) -> str:
    return "".join(r.text() for r in emu.world.jobs[job_id].replicas)


def test_two_emulators_jobs_hold_torch_stores_on_master_port_29400_at_once_and_succeed(
    tmp_path,
    torch,
):
    # Two emulators on one machine: what two checkouts running their suites look like.
    with (
        Emulator(state_dir=tmp_path / "a", seed=1) as a,
        Emulator(state_dir=tmp_path / "b", seed=2) as b,
    ):
        emulators = (a, b)
        command = ["python3", "-c", STORE]
        jobs = [
            create(emu, "nvcr.io/nvidia/pytorch:25.08-py3", command, completions=2,
                   parallelism=2, intra_job_communication=True)
            for emu in emulators
        ]  # fmt: skip
        flags = [emu.world.volumes / "lustre" / PERMITTED for emu in emulators]
        wait_until(
            lambda: (
                all((f / "listening").exists() for f in flags)
                or any(ended(e, j) for e, j in zip(emulators, jobs, strict=True))
            ),
            timeout=300,
            what="both jobs' stores to listen on 29400",
        )
        for folder in flags:
            (folder / "go").write_text("")
        states = [
            wait_until(lambda e=e, j=j: ended(e, j), timeout=300, what=f"job {j} to end")
            for e, j in zip(emulators, jobs, strict=True)
        ]
        texts = [output(e, j) for e, j in zip(emulators, jobs, strict=True)]
    assert states == ["Completed", "Completed"], texts
    for job_id, text in zip(jobs, texts, strict=True):
        assert f"rank 0 met {job_id}" in text and f"rank 1 met {job_id}" in text


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"hello")

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def servers():
    """Two HTTP servers on this machine's loopback."""
    made = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello) for _ in range(2)]
    for server in made:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield [f"http://127.0.0.1:{s.server_address[1]}" for s in made]
    for server in made:
        server.shutdown()
        server.server_close()


PROBE = """
import sys, urllib.request
for name, url in zip(sys.argv[1::2], sys.argv[2::2]):
    try:
        with urllib.request.urlopen(url, timeout=20) as resp:
            print(name, "reached", resp.status, resp.read().decode())
    except OSError as exc:
        print(name, "unreachable", type(exc).__name__)
"""


def test_a_job_reaches_the_relayed_endpoint_and_nothing_else_on_this_machine(tmp_path, servers):
    relayed, other = servers
    with Emulator(state_dir=tmp_path / "emu", outside=[relayed]) as emu:
        api = emu.url.split("/api/")[0] + "/_emulator/healthz"
        urls = ["relayed", relayed, "other", other, "emulator", api]
        job_id = create(emu, "python:3.11", ["python3", "-c", PROBE, *urls])
        state = wait_until(lambda: ended(emu, job_id), timeout=120, what="the probe to end")
        text = output(emu, job_id)
    assert state == "Completed", text
    assert "relayed reached 200 hello" in text
    assert "other unreachable" in text and "emulator unreachable" in text


def test_an_outside_endpoint_off_loopback_is_refused():
    with pytest.raises(ValueError, match="loopback"):
        network.parse_endpoint("http://192.0.2.7:9000")
    assert network.parse_endpoint("http://localhost:9000/bucket") == ("127.0.0.1", 9000)


NAMES = """
import os, socket
me = socket.gethostname()
print("hostname", me, "is", socket.gethostbyname(me), flush=True)
other = "worker-%d.%s" % (1 - int(os.environ["LEPTON_JOB_WORKER_INDEX"]), os.environ["LEPTON_SUBDOMAIN"])
try:
    print("peer", socket.gethostbyname(other), flush=True)
except OSError as exc:
    print("no peer", type(exc).__name__, exc.errno == socket.EAI_NONAME, flush=True)
"""


@pytest.mark.parametrize("intra", [True, False])
def test_each_replica_resolves_its_own_hostname_and_its_peers_only_with_intra_job_communication(
    emulator, intra
):
    job_id = create(
        emulator, "python:3.11", ["python3", "-c", NAMES],
        completions=2, parallelism=2, intra_job_communication=intra,
    )  # fmt: skip
    state = wait_until(lambda: ended(emulator, job_id), timeout=120, what="the job to end")
    replicas = emulator.world.jobs[job_id].replicas
    assert state == "Completed", output(emulator, job_id)
    for replica in replicas:
        text = replica.text()
        # As a kubelet names a pod of a job with a subdomain: its hostname is its worker
        # name, and /etc/hosts gives it its own address.
        assert f"hostname worker-{replica.index} is {replica.address}" in text, text
        if intra:
            assert f"peer {replicas[1 - replica.index].address}" in text, text
        else:  # a definite "no such name", never a resolver that cannot be reached
            assert "no peer gaierror True" in text, text


GLOO = """
import os
import torch.distributed as dist
rank = int(os.environ["LEPTON_JOB_WORKER_INDEX"])
master = "tcp://worker-0." + os.environ["LEPTON_SUBDOMAIN"] + ":29400"
dist.init_process_group("gloo", init_method=master, rank=rank, world_size=2)
dist.barrier()
print("rank", rank, "met", flush=True)
dist.destroy_process_group()
"""


def test_ranks_of_a_pytorch_job_meet_without_a_warning_about_names_or_numpy(emulator):
    job_id = create(
        emulator, "nvcr.io/nvidia/pytorch:25.08-py3", ["python3", "-c", GLOO],
        completions=2, parallelism=2, intra_job_communication=True,
    )  # fmt: skip
    state = wait_until(lambda: ended(emulator, job_id), timeout=300, what="the job to end")
    text = output(emulator, job_id)
    assert state == "Completed" and "rank 0 met" in text and "rank 1 met" in text, text
    # torch's c10d names each connection's peer; an unreachable resolver made every rank
    # warn "The hostname of the client socket cannot be retrieved".
    assert "cannot be retrieved" not in text and "Warning" not in text, text
    assert "Failed to initialize NumPy" not in text, text
