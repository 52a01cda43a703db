"""The multi-node environment contract every backend honours, in every launcher mode.

Every mode exports MASTER_ADDR, MASTER_PORT, NNODES, NODE_RANK and NUM_GPU_PER_NODE, so a
job moves between backends unchanged. `none` (TAO convention) also exports WORLD_SIZE =
number of nodes, because the program spawns its own ranks; with `torchrun` the agent sets
WORLD_SIZE = nodes x processes per node for each worker itself.
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
