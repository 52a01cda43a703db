"""A TAO-style entrypoint: runs once per node, reads the TAO variables, meets its peers.

Node 0 listens on MASTER_ADDR:MASTER_PORT; every other node connects and says its rank.
"""

import os
import socket
import time

env = {k: os.environ.get(k, "") for k in (
    "WORLD_SIZE", "NUM_GPU_PER_NODE", "NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT",
    "WORKER_ADDRS",
)}  # fmt: skip
print(" ".join(f"{k}={v}" for k, v in env.items()), flush=True)
addr = (env["MASTER_ADDR"], int(env["MASTER_PORT"]))
if env["NODE_RANK"] == "0":
    server = socket.create_server(addr)
    server.settimeout(60)
    peers = []
    for _ in range(int(env["NNODES"]) - 1):
        conn, _ = server.accept()
        peers.append(conn.recv(64).decode())
    print("master heard from " + ",".join(sorted(peers)), flush=True)
else:
    deadline = time.monotonic() + 60
    while True:
        try:
            with socket.create_connection(addr, timeout=5) as conn:
                conn.sendall(f"node{env['NODE_RANK']}".encode())
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    print("reached the master", flush=True)
