"""A rank that starts, says so, and then never returns: the hang the watchdog and
`stack` are for. With SERVE_PORT, local rank 0 also serves `node N` over HTTP on
SERVE_PORT + NODE_RANK (what `forward` reaches). Needs torch only under torchrun."""

import http.server
import os
import threading
import time


def serve(port: int, body: bytes) -> None:
    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()


def stuck_in_the_loop() -> None:
    while True:
        time.sleep(0.05)


if __name__ == "__main__":
    if "LOCAL_WORLD_SIZE" in os.environ:  # started by torchrun: meet the others first
        import torch.distributed as dist

        dist.init_process_group("gloo")
    node = os.environ.get("NODE_RANK", "0")
    if os.environ.get("SERVE_PORT") and os.environ.get("LOCAL_RANK", "0") == "0":
        serve(int(os.environ["SERVE_PORT"]) + int(node), f"node {node}\n".encode())
    print(f"ready rank={os.environ.get('RANK')} node={node}", flush=True)
    stuck_in_the_loop()
