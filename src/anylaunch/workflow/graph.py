"""The order of a workflow's steps: pure functions over `step -> needs`, no I/O.

A cycle or an unknown step is found here and reported by the loader at the line where
the offending `needs` entry was written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence


class Cycle(Exception):
    """The steps of a cycle, in order, the first repeated at the end."""

    def __init__(self, path: list[str]) -> None:
        super().__init__(" → ".join(path))
        self.path = path


def levels(needs: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """Steps in dependency order, grouped: every step of a group may run at once, once
    the groups before it are done. Within a group, steps keep the file's order."""
    find_cycle(needs)
    placed: dict[str, int] = {}
    # A step's depth is one more than its deepest need's. Walked with a stack of our own:
    # a chain of needs is as long as the file makes it, far past Python's recursion limit.
    for start in needs:
        stack = [start]
        while stack:
            step = stack[-1]
            if step in placed:
                stack.pop()
                continue
            waiting = [n for n in needs[step] if n not in placed]
            if waiting:
                stack += waiting
                continue
            placed[step] = 1 + max((placed[n] for n in needs[step]), default=-1)
            stack.pop()
    out: list[list[str]] = [[] for _ in range(max(placed.values(), default=-1) + 1)]
    for step in needs:
        out[placed[step]].append(step)
    return out


def order(needs: Mapping[str, Sequence[str]]) -> list[str]:
    return [step for group in levels(needs) for step in group]


def find_cycle(needs: Mapping[str, Sequence[str]]) -> None:
    """Raise Cycle for the first cycle met walking the steps in the file's order."""
    done: set[str] = set()
    for start in needs:
        path: list[str] = []
        on_path: set[str] = set()
        stack: list[tuple[str, int]] = [(start, 0)]
        while stack:
            step, index = stack.pop()
            if index == 0:
                if step in done:
                    continue
                if step in on_path:  # pragma: no cover - caught below before pushing
                    raise Cycle([*path[path.index(step) :], step])
                path.append(step)
                on_path.add(step)
            children = needs[step]
            if index < len(children):
                stack.append((step, index + 1))
                child = children[index]
                if child in on_path:
                    raise Cycle([*path[path.index(child) :], child])
                if child not in done:
                    stack.append((child, 0))
            else:
                path.pop()
                on_path.discard(step)
                done.add(step)


def after(needs: Mapping[str, Sequence[str]], steps: Iterable[str]) -> set[str]:
    """The steps given and every step that needs one of them, directly or not."""
    wanted = set(steps)
    changed = True
    while changed:
        changed = False
        for step, deps in needs.items():
            if step not in wanted and wanted.intersection(deps):
                wanted.add(step)
                changed = True
    return wanted
