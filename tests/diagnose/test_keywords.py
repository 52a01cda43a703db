"""The rules' word pre-check never changes a classification: on every line of the
corpus it picks the rule a search through every rule picks, and the words it reads off
a pattern are ones the pattern cannot match without."""

from __future__ import annotations

from pathlib import Path

import pytest

from anylaunch.observe.diagnose import keywords, rules, score
from anylaunch.observe.diagnose.lines import parse

CASES = score.load(Path(__file__).resolve().parent / "corpus")


def _search_every_rule(text: str) -> rules.Rule | None:
    if rules.IGNORE.search(text):
        return None
    body = rules.strip_prefix(text)
    weak = None
    for rule in rules.RULES:
        if rule.pattern.search(text) or rule.pattern.search(body):
            if rule.strength == rules.WEAK:
                weak = weak or rule
            elif rule.generic and weak is not None:
                return weak
            else:
                return rule
    return weak


def test_the_pre_check_picks_the_rule_a_full_search_picks_on_every_corpus_line():
    lines = [line.text for case in CASES for line in parse(case.text)]
    lines += ["[rank1]: step 10 loss 0.1 lr 3e-4", "W1218 12:00:00 warn.py:1] fine"]
    assert [rules.classify(t) for t in lines] == [_search_every_rule(t) for t in lines]


@pytest.mark.parametrize(
    ("alternative", "word"),
    [
        (r"\bjob (was )?requeued\b", "requeued"),
        (r"Detected \d+ oom_kill events?", " oom_kill event"),
        (r"\b401\b.{0,40}(Unauthorized|Client Error)", "401"),
        (r"NET/IB ?: No device found", ": no device found"),
        (r"^(?!.*(torch_|NCCL)).*Cannot allocate memory", "cannot allocate memory"),
        (r"[A-Z]\w*(?:Error|Exception)", None),
    ],
)
def test_a_word_is_one_the_alternative_always_matches(alternative, word):
    assert keywords.required_literal(alternative) == word
