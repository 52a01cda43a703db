"""The multi-node contract every backend honours, in every launcher mode.

Every node exports MASTER_ADDR, MASTER_PORT, NNODES, NODE_RANK and NUM_GPU_PER_NODE,
whatever the launcher mode, so a job moves between backends unchanged; the torchrun line
reads them. `none` (TAO convention) also exports WORLD_SIZE = number of nodes, because
the program spawns its own ranks; with `torchrun` the agent sets WORLD_SIZE = nodes x
processes per node for each worker itself.

Schedulers' nodes translate their platform's variables into the contract in the node
script's first lines (below); the local backend sets them in each node's environment
instead (`Rendezvous.node_env`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rendezvous:
    master_addr: str
    master_port: int
    nnodes: int
    nproc_per_node: int

    def node_env(self, node_rank: int | str, launcher: str) -> dict[str, str]:
        """Variables for one node; `node_rank` may be a shell expression on schedulers."""
        env = {
            "MASTER_ADDR": self.master_addr,
            "MASTER_PORT": str(self.master_port),
            "NNODES": str(self.nnodes),
            "NODE_RANK": str(node_rank),
            "NUM_GPU_PER_NODE": str(self.nproc_per_node),
            "NPROC_PER_NODE": str(self.nproc_per_node),
        }
        if launcher == "none":
            env["WORLD_SIZE"] = str(self.nnodes)
        return env


LEPTON_MASTER_PORT = 29400  # lepton_env_to_pytorch.sh's constant (not torch's 29500)

# Lepton injects LEPTON_JOB_WORKER_INDEX / TOTAL_WORKERS / WORKER_PREFIX / SUBDOMAIN; the
# official `lepton_env_to_pytorch.sh` (v4) turns them into MASTER_ADDR, MASTER_PORT,
# NNODES, NODE_RANK and WORKER_ADDRS. TAO and NeMo-Run download that script with wget at
# job start; the same translation ships inside the command, so a job never depends on
# reaching GitHub from the cluster.
_LEPTON = """\
# Lepton worker variables -> PyTorch rendezvous (lepton_env_to_pytorch.sh v4, inline)
export MASTER_ADDR="${LEPTON_JOB_WORKER_PREFIX}-0.${LEPTON_SUBDOMAIN}"
export MASTER_PORT=%(port)d
export NNODES="${LEPTON_JOB_TOTAL_WORKERS}"
export NODE_RANK="${LEPTON_JOB_WORKER_INDEX}"
WORKER_ADDRS=""
for ((_w = 1; _w < NNODES; _w++)); do
  WORKER_ADDRS="${WORKER_ADDRS:+${WORKER_ADDRS},}${LEPTON_JOB_WORKER_PREFIX}-${_w}.${LEPTON_SUBDOMAIN}"
done
unset _w
export WORKER_ADDRS"""

# SkyPilot starts `run` once per node with SKYPILOT_NODE_RANK, SKYPILOT_NUM_NODES and
# SKYPILOT_NODE_IPS (one IP per line, head first).
_SKYPILOT = """\
# SkyPilot node variables -> the rendezvous contract
export MASTER_ADDR="$(printf '%%s\\n' "$SKYPILOT_NODE_IPS" | head -n 1)"
export MASTER_PORT=%(port)d
export NNODES="${SKYPILOT_NUM_NODES:-1}"
export NODE_RANK="${SKYPILOT_NODE_RANK:-0}"
export NUM_GPU_PER_NODE=%(gpus)d
export NPROC_PER_NODE=%(gpus)d"""


def lepton(port: int = LEPTON_MASTER_PORT) -> list[str]:
    return (_LEPTON % {"port": port}).splitlines()


def skypilot(port: int, gpus: int) -> list[str]:
    return (_SKYPILOT % {"port": port, "gpus": gpus}).splitlines()


def slurm_batch(port: int, nodes: int, ntasks: int, world_size: int) -> list[str]:
    """The batch shell's part: the first host of the allocation is the master."""
    return [
        "# Rendezvous: the first host of the allocation is the master.",
        'export MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"',
        f"export MASTER_PORT={port}",
        f"export NNODES={nodes}",
        f"export NUM_GPU_PER_NODE={ntasks}",
        f"export NPROC_PER_NODE={ntasks}",
        f"export WORLD_SIZE={world_size}",
    ]


def slurm_task(launcher: str, ntasks: int) -> list[str]:
    """Each task's part: a value computed in the batch shell would be node 0's everywhere."""
    out = ['export NODE_RANK="$SLURM_NODEID"']
    if launcher == "srun":
        out.append('export RANK="$SLURM_PROCID" LOCAL_RANK="$SLURM_LOCALID"')
        out.append(f"export LOCAL_WORLD_SIZE={ntasks}")
    return out
