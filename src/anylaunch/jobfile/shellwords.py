"""`shlex.split` in linear time.

shlex builds each word a character at a time (`token += char`), which copies the word
so far on every character: a 128 KiB word took seconds. This reads the same POSIX rules
(whitespace splits; '...' is literal; "..." keeps a backslash unless it escapes " or \\;
a backslash outside quotes escapes any character; with `comments`, an unquoted `#` ends
the word and skips to the end of its line, as shlex does even inside a word) in slices.
"""

from __future__ import annotations

import re

_PLAIN = re.compile(r"[^ \t\r\n'\"\\]+")
_PLAIN_NO_HASH = re.compile(r"[^ \t\r\n'\"\\#]+")
_IN_DOUBLE = re.compile(r'[^"\\]+')
_SPACE = " \t\r\n"


def split(line: str, comments: bool = False) -> list[str]:
    """The words of `line`, as `shlex.split(line, comments)` gives them (ValueError the
    same)."""
    plain = _PLAIN_NO_HASH if comments else _PLAIN
    words: list[str] = []
    word: list[str] = []
    in_word = False
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c in _SPACE:
            if in_word:
                words.append("".join(word))
                word, in_word = [], False
            i += 1
            continue
        if comments and c == "#":
            if in_word:
                words.append("".join(word))
                word, in_word = [], False
            end = line.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        in_word = True
        if c == "'":
            end = line.find("'", i + 1)
            if end < 0:
                raise ValueError("No closing quotation")
            word.append(line[i + 1 : end])
            i = end + 1
        elif c == '"':
            i = _double(line, i + 1, word)
        elif c == "\\":
            if i + 1 >= n:
                raise ValueError("No escaped character")
            word.append(line[i + 1])
            i += 2
        else:
            match = plain.match(line, i)
            assert match is not None
            word.append(match.group())
            i = match.end()
    if in_word:
        words.append("".join(word))
    return words


def _double(line: str, i: int, word: list[str]) -> int:
    """Read a "..." body from `i` into `word`; the index after the closing quote."""
    n = len(line)
    while i < n:
        c = line[i]
        if c == '"':
            return i + 1
        if c == "\\":
            if i + 1 >= n:
                raise ValueError("No escaped character")
            following = line[i + 1]
            word.append(following if following in '"\\' else c + following)
            i += 2
            continue
        match = _IN_DOUBLE.match(line, i)
        assert match is not None
        word.append(match.group())
        i = match.end()
    raise ValueError("No closing quotation")
