"""Conflicting answers (figures, names, dates) from two sources are detected in code and both sides kept with dates."""
from __future__ import annotations

import pytest

from pipeline.core.schema import Finding, Plan, Source, SubQuestion
from pipeline.research.extractive.analysis import analyse_part
from pipeline.research.steps.conflicts import answer_conflicts, find_conflicts, variants


def src(i: int, published: str | None) -> Source:
    return Source(id=f"S{i}", url=f"https://s{i}.example/", final_url=f"https://s{i}.example/", title=None,
                  published=published, fetched_at="2026-01-01T00:00:00+00:00", sha256="0" * 64, chars=1)


def f(i: int, source: str, claim: str, quote: str, sq: str = "Q1") -> Finding:
    return Finding(id=f"F{i}", sub_question=sq, source=source, claim=claim, quote=quote, start=0, end=len(quote))


SOURCES = [src(1, "2024-05-01"), src(2, "2025-02-10"), src(3, None)]


def test_two_sources_with_different_prices_conflict_with_dates() -> None:
    a = f(1, "S1", "Qdrant Cloud costs $25 per month", "Qdrant Cloud starts at $25 per month")
    b = f(2, "S2", "Qdrant Cloud costs $30 per month", "the Qdrant Cloud plan now costs $30/month")
    [c] = find_conflicts([a, b], SOURCES)
    assert c.findings == ["F1", "F2"] and c.sub_question == "Q1"
    assert "2024-05-01" in c.description and "2025-02-10" in c.description
    assert "$25 per month" in c.description and "$30/month" in c.description


def test_same_figure_is_no_conflict() -> None:
    a = f(1, "S1", "Qdrant Cloud costs $25 per month", "Qdrant Cloud starts at $25 per month")
    b = f(2, "S2", "Qdrant Cloud costs $25 per month", "Qdrant Cloud: $25.00 per month")
    assert find_conflicts([a, b], SOURCES) == []


def test_same_source_different_sub_question_or_different_topic_is_no_conflict() -> None:
    a = f(1, "S1", "Qdrant Cloud costs $25 per month", "Qdrant Cloud starts at $25 per month")
    same_source = f(2, "S1", "Qdrant Cloud costs $30 per month", "Qdrant Cloud costs $30 per month")
    other_sq = f(3, "S2", "Qdrant Cloud costs $30 per month", "Qdrant Cloud costs $30 per month", sq="Q2")
    other_topic = f(4, "S3", "Milvus has 30,000 GitHub stars", "Milvus has 30,000 stars on GitHub")
    assert find_conflicts([a, same_source, other_sq, other_topic], SOURCES) == []


def test_undated_source_is_said_to_be_undated() -> None:
    a = f(1, "S1", "The population of the town is 12,000", "a town of 12,000 people")
    b = f(2, "S3", "The population of the town is 15,500", "population: 15,500")
    [c] = find_conflicts([a, b], SOURCES)
    assert "undated" in c.description


# --- answers of the question's type: names, dates and titles as well as figures -----------------------------------

def _plan(question: str) -> Plan:
    return Plan(sub_questions=[SubQuestion(id="Q1", question=question)])


WHO_WON = "Which nation won the 2019 Davis Cup final in Madrid?"


def test_two_sources_naming_different_winners_conflict() -> None:
    a = f(1, "S1", "Spain won", "Spain beat Canada 2-0 to win the 2019 Davis Cup final in Madrid.")
    b = f(2, "S2", "Croatia won", "Croatia won the 2019 Davis Cup final in Madrid.")
    [c] = answer_conflicts(_plan(WHO_WON), [a, b], SOURCES, [])
    assert c.findings == ["F1", "F2"] and c.sub_question == "Q1"


def test_two_sources_naming_the_same_winner_do_not_conflict() -> None:
    a = f(1, "S1", "Spain won", "Spain beat Canada 2-0 to win the 2019 Davis Cup final in Madrid.")
    b = f(2, "S2", "Spain won", "Rafael Nadal led Spain to the 2019 Davis Cup title in Madrid.")
    assert answer_conflicts(_plan(WHO_WON), [a, b], SOURCES, []) == []


def test_different_figures_for_a_count_conflict_and_a_known_pair_is_not_repeated() -> None:
    question = "How many 787-9 Dreamliners did Emirates order at the Dubai Air Show?"
    a = f(1, "S1", "30 jets", "Emirates ordered 30 Boeing 787-9 Dreamliners at the Dubai Air Show.")
    b = f(2, "S2", "40 jets", "Emirates ordered 40 Boeing 787-9 Dreamliners at the Dubai Air Show.")
    [c] = answer_conflicts(_plan(question), [a, b], SOURCES, [])
    assert answer_conflicts(_plan(question), [a, b], SOURCES, [c]) == []


def test_different_dates_conflict_for_a_when_question() -> None:
    question = "When did Boeing's Starliner capsule launch on its first uncrewed test flight?"
    a = f(1, "S1", "December 20", "Boeing's Starliner capsule launched on December 20 on its first uncrewed flight.")
    b = f(2, "S2", "December 21", "Boeing's Starliner capsule launched on December 21 on its first uncrewed flight.")
    assert len(answer_conflicts(_plan(question), [a, b], SOURCES, [])) == 1


# --- one sentence told two ways: the same claim with another name, title or figure in one place --------------------

STADIA = ("Notably, only one title at launch is exclusive to the Stadia service, indie developer Tequila Works' {}, "
          "while most of the other games offered have been on the market for months.")


def test_two_tellings_of_one_sentence_with_different_titles_conflict() -> None:
    # Both quotes name "Tequila Works" first, so their first answers agree: only the changed detail tells them apart.
    question = "Which title was the only one exclusive to Stadia at launch?"
    a, b = f(1, "S1", "Gylt", STADIA.format("Gylt")), f(2, "S2", "Rime", STADIA.format("Rime"))
    [c] = answer_conflicts(_plan(question), [a, b], SOURCES, [])
    assert c.findings == ["F1", "F2"] and "Gylt" in c.description and "Rime" in c.description


TWITTER = ("LONDON (AP) — Britain's Conservative Party was accused Wednesday of trying to deceive voters by changing "
           "the name of its press office Twitter account to “{}” during a televised election debate.")


def test_an_untyped_question_still_sees_a_changed_name() -> None:
    question = "What name did Britain's Conservative Party give its press office Twitter account during the debate?"
    a = f(1, "S1", "factcheckUK", TWITTER.format("factcheckUK"))
    b = f(2, "S2", "realitycheckUK", TWITTER.format("realitycheckUK"))
    assert len(answer_conflicts(_plan(question), [a, b], SOURCES, [])) == 1


@pytest.mark.parametrize("old,new", [
    ("(AP)", "(Reuters)"),  # the agency that carried it, in parentheses
    ("Wednesday", "on Wednesday"),  # the same words
    ("accused", "charged"),  # another word, but no name, figure or date
    ("Conservative Party", "Tory party"),  # the question's own words on one side
])
def test_two_tellings_that_differ_in_no_detail_asked_for_do_not_conflict(old: str, new: str) -> None:
    question = "What name did Britain's Conservative Party give its press office Twitter account during the debate?"
    quote = TWITTER.format("factcheckUK")
    a, b = f(1, "S1", "factcheckUK", quote), f(2, "S2", "factcheckUK", quote.replace(old, new))
    assert answer_conflicts(_plan(question), [a, b], SOURCES, []) == []


def test_two_different_sentences_are_not_two_tellings() -> None:
    question = "Which title was the only one exclusive to Stadia at launch?"
    a = f(1, "S1", "Gylt", STADIA.format("Gylt"))
    b = f(2, "S2", "Stadia", "Google said Stadia would add Destiny 2 and Red Dead Redemption 2 before the end of 2019.")
    assert variants(a.quote, b.quote, analyse_part(question)) is False
