"""Failure diagnosis on every backend: from exit codes, backend states, events and the
log lines of every node to one class, its cause, a fix, and the evidence.

`rules` is the readable table (pattern -> class); `lines` attributes each log line to
its node and rank; `engine` picks the root cause over the cascade that follows it
(`engine.diagnose_lines`). This package's face names nothing itself: a reader of the
classes or the retry policy (a submit) does not compile the rules.
"""
