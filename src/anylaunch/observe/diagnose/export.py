"""The diagnosis rules as plain data, for the in-job runtime's own reading of a failed
attempt (`node/runtime/triage.py`): a Slurm job deciding inside its allocation whether
its retry policy retries what just happened.

The runtime runs with the standard library alone, so it cannot import this package; it
carries `node/runtime/rules_table.py`, generated from `rules`, `classes` and `lines`
here. One source, two readers: a test fails when the generated file differs from what
this module writes, and it names the command that writes it again:

    python -m anylaunch.observe.diagnose.export src/anylaunch/node/runtime/rules_table.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from anylaunch.observe.diagnose import findings, lines, policy, rules, teardown
from anylaunch.observe.diagnose.classes import CLASSES

HEADER = '''\
"""The diagnosis rules as data, for `triage`: GENERATED from anylaunch's diagnosis
(observe/diagnose/export.py writes it; a test checks it is current). Do not edit."""

from __future__ import annotations

# fmt: off
'''


def blames(rule: rules.Rule) -> bool:
    """Whether a failure this rule names is pinned on the node whose log shows it (the
    same test as `policy.blamed_node`)."""
    return rule.code in policy.NODE_CLASSES or (
        rule.code == "NCCL_ERROR" and rule.source.startswith(rules.NCCL_IB)
    )


def source() -> str:
    """The text of the generated module."""
    table = [
        (
            r.code,
            r.strength,
            r.pattern.pattern,
            bool(r.pattern.flags & 2),
            r.words,
            blames(r),
            r.generic,
        )
        for r in rules.RULES
    ]
    parts = [
        HEADER,
        f"STRONG = {rules.STRONG!r}\n",
        f"ORDER = {tuple(c.code for c in CLASSES)!r}  # highest precedence first\n",
        f"IGNORE = {rules.IGNORE.pattern!r}\n",
        f"PREFIX = {rules._PREFIX.pattern!r}\n",
        f"WARNING = {lines._WARNING.pattern!r}\n",
        "# A line that opens a record of its own, not the rest of a wrapped one.\n",
        f"RECORD = {findings.RECORD.pattern!r}\n",
        "# What a program prints when its work is over, and the classes that are then the\n",
        "# shutdown failing (a store or a peer gone), not a failure to retry.\n",
        f"END_OF_WORK = {teardown.END_OF_WORK.pattern!r}\n",
        f"SHUTDOWN_CLASSES = {tuple(sorted(teardown.SHUTDOWN_CLASSES))!r}\n",
        "# The launchers' prefixes before a line, outermost first, and what each numbers.\n",
        f"LINE_PREFIXES = {tuple((p.pattern, what) for p, what in lines._PREFIXES)!r}\n",
        "# (class, strength, pattern, ignore case, words: a line with none of them cannot\n",
        "# match, whether the failure is pinned on the node whose log shows it, generic: an\n",
        "# exception's class alone, which yields to a weak rule naming a cascade on the line)\n",
        "RULES: list[tuple[str, int, str, bool, tuple[str, ...] | None, bool, bool]] = [\n",
        *(f"    {row!r},\n" for row in table),
        "]\n",
    ]
    return "".join(parts)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: python -m anylaunch.observe.diagnose.export FILE\n")
        return 2
    Path(argv[0]).write_text(source(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
