"""Failure diagnosis on every backend: from exit codes, backend states, events and the
log lines of every node to one class, its cause, a fix, and the evidence.

`rules` is the readable table (pattern -> class); `lines` attributes each log line to
its node and rank; `engine` picks the root cause over the cascade that follows it.
"""

from anylaunch.observe.diagnose.engine import Diagnosis, diagnose_lines, diagnose_text

__all__ = ["Diagnosis", "diagnose_lines", "diagnose_text"]
