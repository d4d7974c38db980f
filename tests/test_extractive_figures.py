"""Answer figures and the conflicts they make in extractive runs (pipeline/research/extractive/figures.py)."""
from __future__ import annotations

import re

import pytest

from pipeline.research.extractive.figures import ages, answer_figures, disagree
from tests.regex_audit import token_texts

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


def test_ages_are_found_where_the_former_pattern_found_them() -> None:
    # The former pattern's "Name, 55," form started again at each capital of a long word (quadratic).
    former = re.compile(r"\b\d{1,3}[- ]years?[- ]old\b|\baged? \d{1,3}\b|[A-Z][\w.'’-]+, \d{1,3},")
    tokens = [" ", ",", ", ", "1", "12", "1234", "-", "years", "year", "old", "aged", "Ab", "b", ".", "'", "_", "É",
              "5-years-old", ", 4,", "x"]
    for text in token_texts(tokens, count=5000):
        assert ages(text) == [m.group() for m in former.finditer(text)], text
    assert ages("Patrick W. Carlineo Jr., 55, and a 48-year-old man, aged 50") == ["Jr., 55,", "48-year-old", "aged 50"]


def test_a_word_of_the_questions_family_ties_a_figure() -> None:
    question = "How much did Veltrix pay for Coremind?"
    sentence = ("Veltrix agreed to acquire Coremind, a start-up whose software helps hospitals forecast staffing "
                "shortages, in an all-cash transaction valued at $2.35 billion, the largest purchase in its history.")
    assert answer_figures(question, sentence) == frozenset({"2.35e9"})  # "purchase" is of "pay"'s family
    assert answer_figures(question, "The firm employs about 9,000 people in 14 countries.") == frozenset()
