"""The classifier against the corpus of real messages in corpus/: each message's class
(and, where the case says, its node, rank and whether it is inferred), at least 95% of
them right, at least 95% of the half held out by source repository right, and every
rule exercised by a message it was taken from."""

from __future__ import annotations

from pathlib import Path

import pytest

from anylaunch.observe.diagnose import rules, score

CORPUS = Path(__file__).resolve().parent / "corpus"
CASES = score.load(CORPUS)


def test_the_corpus_holds_at_least_200_real_messages_each_with_its_source():
    entries = {(c.file, c.index) for c in CASES}
    assert len(entries) >= 200
    assert all(c.source.strip() and c.expect in rules.BY_CODE for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_each_corpus_message_is_diagnosed_as_its_class(case):
    assert case.check(case.run()) == []


def test_at_least_95_percent_of_the_corpus_is_right():
    assert score.score(CASES).accuracy >= 0.95


def test_at_least_95_percent_of_the_half_held_out_by_source_repository_is_right():
    tuned, held_out = score.split(CASES)
    assert tuned and held_out
    assert score.score(held_out).accuracy >= 0.95


def test_the_split_keeps_each_repository_whole_and_does_not_depend_on_the_rest():
    tuned, held_out = score.split(CASES)
    assert not {c.repository for c in tuned} & {c.repository for c in held_out}
    # A case's side is its repository's alone: the same whatever else is loaded.
    alone = [score.split([case])[1] == [case] for case in CASES[::7]]
    assert alone == [case in held_out for case in CASES[::7]]


@pytest.mark.parametrize(
    ("source", "repository"),
    [
        ("NVIDIA/pyxis pyxis_slurmstepd.c:753", "nvidia/pyxis"),
        ("https://github.com/NVIDIA/pyxis/issues/70 (enroot src/common.sh:134)", "nvidia/pyxis"),
        ("kubernetes/kubernetes pkg/kubelet (container status)", "kubernetes/kubernetes"),
        ("NVIDIA Xid errors, Xid 48 (double bit ECC)", "nvidia"),
        ("GNU bash", "gnu"),
    ],
)
def test_a_source_names_the_repository_it_was_taken_from(source, repository):
    assert score.repository(source) == repository


def test_every_rule_is_exercised_by_a_corpus_message():
    assert score.score(CASES).unused_rules == []


def test_every_signal_meaning_is_exercised():
    from anylaunch.observe.diagnose.signals import MEANINGS

    missing = set(MEANINGS) - score.signals_read(CASES) - {4, 8, 1, 2}
    assert missing == set()
