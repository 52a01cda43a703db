"""`python -m anylaunch.storage in|out MANIFEST`: the in-job staging steps, run from an
installed anylaunch (jobs themselves run the shipped runtime zipapp, which is the same code)."""

from __future__ import annotations

import sys

from anylaunch.node.runtime import main as runtime_main


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("in", "out"):
        print("usage: python -m anylaunch.storage in|out MANIFEST", file=sys.stderr)
        return 2
    return runtime_main.main(["stage", *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
