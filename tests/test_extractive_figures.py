"""Answer figures and the conflicts they make in extractive runs (pipeline/research/extractive/figures.py)."""
from __future__ import annotations

import pytest

from pipeline.research.extractive.figures import answer_figures, disagree

WEWORK = "How many employees does WeWork have?"


@pytest.mark.parametrize(("question", "a", "b", "conflict"), [
    ("How old is Julian Assange?", "The US wants the UK to extradite Assange, 47, over his alleged role.",
     "The 48-year-old Australian was evicted in April.", True),
    (WEWORK, "More than a third of WeWork's 12,000 employees will likely receive notice this week.",
     "The company itself had 12,500 employees on June 30.", True),
    (WEWORK, "More than a third of WeWork's 12,000 employees will likely receive notice this week.",
     "WeWork had 12,000 employees before the layoffs.", False),  # a shared figure: the accounts agree
    ("How large is SoftBank's lifeline for WeWork?", "After receiving a lifeline from SoftBank worth $8 billion.",
     "SoftBank committed to a $9.5 billion lifeline to bail out the company.", True),
    ("What was Harbor Corp's revenue?", "Harbor Corp's revenue in the first quarter was $412.6 million.",
     "Second-quarter revenue at Harbor Corp reached $438.1 million.", False),  # two periods, not two accounts
    ("What was Harbor Corp's revenue?", "Harbor Corp's revenue in Q1 was $412.6 million.",
     "Harbor Corp's first quarter revenue was $450 million, a rival report said.", True),
])
def test_two_sentences_disagree_only_on_the_figures_that_answer(question: str, a: str, b: str,
                                                                conflict: bool) -> None:
    assert disagree(question, a, b) is conflict


def test_figures_about_something_else_do_not_count() -> None:
    sentence = ("WeWork employees waited weeks for notice since the valuation was slashed from $47 billion to "
                "$8 billion.")
    assert answer_figures(WEWORK, sentence) == frozenset()
    assert answer_figures(WEWORK, "The company had 12,500 employees on June 30.") == frozenset({"12500"})
