"""Evaluate one language of a small corpus: one split of splits_retry.yaml.

Reads eval-data/<lang>.txt and prints a score (here, words per line). A missing file
fails this split alone; the others are unaffected, and `anylaunch retry RUN --failed`
reruns only the failed ones once the file is there.
"""

import argparse
import sys
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lang", required=True)
    parser.add_argument("--data", default="eval-data")
    args = parser.parse_args()

    path = Path(args.data) / f"{args.lang}.txt"
    if not path.is_file():
        sys.exit(f"eval_split: no data for {args.lang}: {path} does not exist")
    lines = [line.split() for line in path.read_text(encoding="utf-8").splitlines() if line]
    score = sum(len(words) for words in lines) / max(len(lines), 1)
    print(f"eval {args.lang}: {len(lines)} lines, {score:.2f} words per line")


if __name__ == "__main__":
    main()
