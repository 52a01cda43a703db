"""A job that failed after its training was over: the ranks printed their last line,
then one of them aborted while the process shut down, or the rendezvous store was
gone when the agents met at the exit barrier.

Such a failure is the distributed runtime's, not the program's: with torch 2.13 on CPU,
gloo's threads can outlive destroy_process_group and abort a rank while the interpreter
finalizes ("terminate called without an active exception", SIGABRT), and torchrun's
agents meet at an exit barrier on a store that the first agent to leave takes with it.
It is only read so when the log shows that the work ended first: a line saying
training is over (the program's own, or its framework's), before the failure on its
node, and nothing but the shutdown failing after it. The same abort in the middle of
training, or an exception raised after it (a checkpoint that cannot be written), stay
the program's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from anylaunch.observe.diagnose.findings import Finding
from anylaunch.observe.diagnose.lines import LogLine

# What a training program or its framework prints when training is over (and never
# before): a plain "training finished/complete/done", Hugging Face Trainer's final
# metrics and message, Lightning's `Trainer.fit` stop, Megatron's "after training is
# done", torchtitan's "Training completed".
END_OF_WORK = re.compile(
    r"\btraining (is |has )?(finished|complete|completed|done|ended|over)\b"
    r"|\b(finished|completed|done with|end of) (the )?(training|fine-?tuning|pre-?training)\b"
    r"|\b(fine-?tuning|pre-?training) (is |has )?(finished|complete|completed|done)\b"
    r"|'train_runtime'|`Trainer\.fit` stopped|\bafter training is done\b"
    r"|\bmodels? (was |were )?exported (at|to)\b"
    # ProcessGroupNCCL's destructor, as the interpreter exits after the program returned
    # (an exception's traceback would come before it, and stays the program's)
    r"|destroy_process_group\(\) was not called before program exit",
    re.IGNORECASE,
)
# The shutdown failing: an abort with no exception, torchrun's exit barrier, the store.
ABORT = re.compile(r"terminate called (without an active exception|recursively)")
EXIT_BARRIER = re.compile(r"Error waiting on exit barrier")
# Classes whose lines are the shutdown failing when they come after the work's end: a
# store or a peer's connection gone (the collective and rendezvous classes).
SHUTDOWN_CLASSES = frozenset({"RDZV_FAILED", "NCCL_ERROR"})
# What may be read around it: the signals and exit statuses it causes, torchrun's
# summary and the workers it stops (weak findings of these classes).
CASCADE_CLASSES = frozenset({"USER_ERROR", "CANCELLED", "RDZV_FAILED", "NCCL_ERROR"})
# A process that crashes while it exits (an abort, a segmentation fault in a runtime's
# disconnect or a library's destructor): the interpreter finalizing after the work.
SHUTDOWN_SIGNALS = frozenset({6, 11})


@dataclass(frozen=True)
class Teardown:
    ends: list[LogLine]  # the lines saying training was over
    failures: list[Finding]  # the shutdown failing, first the lines that name it


def read(lines: Sequence[LogLine], found: Sequence[Finding], strong: int) -> Teardown | None:
    """The teardown failure `found` shows in `lines`, if that is all it shows."""
    ends = [line for line in lines if END_OF_WORK.search(line.text)]
    if not ends:
        return None
    order = {id(line): i for i, line in enumerate(lines)}
    failures = []
    for finding in found:
        if finding.strength == 0:
            continue  # a warning decides nothing here either
        if _is_shutdown(finding):
            if finding.line.source == "log" and not _after_end(finding.line, ends, order):
                return None  # the same failure before the work ended is the program's
            failures.append(finding)
        elif finding.strength >= strong or finding.code not in CASCADE_CLASSES:
            return None  # another failure: that one is the diagnosis
    if not failures:
        return None
    failures.sort(key=lambda f: (f.reading is not None, -f.strength, order.get(id(f.line), 0)))
    return Teardown(ends, failures)


def _is_shutdown(finding: Finding) -> bool:
    if finding.reading is not None:
        return finding.reading.meaning.signal in SHUTDOWN_SIGNALS
    text = finding.line.text
    return bool(ABORT.search(text) or EXIT_BARRIER.search(text) or finding.code in SHUTDOWN_CLASSES)


def _after_end(line: LogLine, ends: Sequence[LogLine], order: dict[int, int]) -> bool:
    """Did the work end before `line` on its node? (Nodes' logs are read one after the
    other, so only a node's own lines are in time order; a node that printed no end of
    its own waited for the others in every collective, and ended with them.)"""
    own = [end for end in ends if end.node == line.node or None in (end.node, line.node)]
    return not own or order[id(own[0])] < order[id(line)]
