"""`lepton-emulator`: serve an emulated workspace in the foreground until interrupted.

Prints one JSON line with the workspace URL; a client is pointed at it with
LEPTON_WORKSPACE_URL, LEPTON_WORKSPACE_ID and LEPTON_AUTH_TOKEN.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import tempfile
from pathlib import Path

from lepton_emulator.server import DEFAULT_WORKSPACE, serve


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lepton-emulator",
        description="Serve a local emulator of the DGX Cloud Lepton job API until interrupted.",
    )
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (default).")
    parser.add_argument("--host", default="127.0.0.1", help="a loopback address")
    parser.add_argument("--workspace", default=DEFAULT_WORKSPACE)
    parser.add_argument(
        "--token",
        default=os.environ.get("LEPTON_EMULATOR_TOKEN"),
        help="the accepted token (default: $LEPTON_EMULATOR_TOKEN, else a random one)",
    )
    parser.add_argument("--state-dir", help="replica files and volumes (default: a temp dir)")
    parser.add_argument(
        "--fault", dest="faults", action="append", default=[], metavar="JSON",
        help="a fault to switch on; repeatable",
    )  # fmt: skip
    parser.add_argument(
        "--outside", action="append", default=[], metavar="HOST:PORT",
        help="a loopback endpoint jobs may reach (e.g. the S3 server); repeatable",
    )  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    token = args.token
    if not token:
        token = "emu-" + secrets.token_hex(12)
        print(f"token: {token}", file=sys.stderr)
    try:
        faults = [json.loads(f) for f in args.faults]
        serve(
            host=args.host,
            port=args.port,
            workspace=args.workspace,
            token=token,
            state_dir=Path(args.state_dir or tempfile.mkdtemp(prefix="lepton-emu-")),
            faults=faults,
            outside=args.outside,
        )
    except (ValueError, OSError) as exc:  # a bad --fault, --outside or --host; a taken port
        parser.exit(2, f"lepton-emulator: {exc}\n")
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
