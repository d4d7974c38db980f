"""Numbered editions of what a question asks about ("iPhone 14", "season 2") and sentences that name another."""
from __future__ import annotations

import time

import pytest

from pipeline.research.extractive.editions import Edition, editions_of, other_edition


def test_an_edition_is_a_number_after_a_name_or_a_series_word_or_a_unit_before_a_word() -> None:
    assert editions_of("What does the 13-inch MacBook Pro cost in 2020?") == [Edition("macbook", "13-inch", "before")]
    assert editions_of("When does season 2 of Severance premiere?") == [Edition("season", "2", "after")]
    assert editions_of("Which engines will power the Boeing 787-9s?") == [Edition("boe", "787-9", "after")]
    # An owner, a count, a measure, a date and a year are no editions.
    assert editions_of("Which engines will power Emirates' 787-9s?") == []
    assert editions_of("Who scored 30 points in the November 18 game, 5 miles from 2019's venue?") == []
    # An ordinal numbers the name after it; a Roman numeral after a name is a number ("LVI" is 56).
    assert editions_of("Who won Best Picture at the 94th Academy Awards?") == [Edition("academi", "94", "before")]
    assert editions_of("Who won Super Bowl LVI?") == [Edition("bowl", "56", "after")]
    assert editions_of("When is the November 18th game?") == []  # a date
    assert editions_of("What did DC and I see in Washington?") == []  # no numerals
    assert editions_of("Who won Super Bowl XC?") == []  # C, D and M are no numerals here
    assert editions_of("Who succeeded Louis XIV?") == []  # the answer is another edition


@pytest.mark.parametrize(("question", "sentence", "other"), [
    ("How much does the iPhone 14 cost?", "The iPhone 13 starts at $699.", True),
    ("How much does the iPhone 14 cost?", "The iPhone 14 costs $799, $100 more than the iPhone 13.", False),
    ("How much does the iPhone 14 cost?", "Apple's new phone costs $799.", False),  # no edition said
    ("How much does the iPhone 14 cost?", "It costs $799, $100 more than last year's iPhone 13.", False),  # compared
    ("How much does the iPhone 14 cost?", "Unlike the previous iPhone 13, it costs $799.", False),  # compared
    ("When does season 2 of Severance premiere?", "Season 1 premiered on February 18.", True),
    ("When does season 2 of Severance premiere?", "It premieres Jan. 17, three years after season 1 debuted.", False),
    ("When does season 2 of Severance premiere?", "Both 2 seasons were filmed in New York.", False),  # a count
    ("Which city does the Doobie tour start in on June 9?", "It kicks off June 10 in West Palm Beach.", False),  # date
    ("How many people did the 10,000-seat arena hold?", "The 10000-seat arena was full.", False),  # thousands
    ("Which engines will power the Boeing 787-9s?", "The Boeing 787-9 will have GE engines.", False),  # a plural
    ("Which engines will power the Boeing 787-9s?", "The Boeing 777X will have GE engines.", True),
    ("Which engines will power the Boeing 787-9s?", "The 777X will have GE engines.", False),  # no word beside it
    ("What does the 13-inch MacBook Pro cost?", "The 16-inch MacBook Pro costs $2,399.", True),
    ("What is the June 9 show's venue?", "Galaxy 14 tickets sold out.", False),  # another word's number
    # A question that names two editions of one word takes either.
    ("Which modules deprecated since Python 3.6 are removed in Python 3.12?", "Removed in Python 3.12: asynchat.",
     False),
    ("Which modules deprecated since Python 3.6 are removed in Python 3.12?", "New in Python 3.13: x.", True),
    ("Who won Best Picture at the 94th Academy Awards?", "CODA won at the 93rd Academy Awards.", True),
    ("Who won Best Picture at the 94th Academy Awards?", "CODA won at the 94th Academy Awards.", False),
    ("Who won Best Picture at the 94th Academy Awards?", "It was his 3rd award.", False),  # lower case: a count
    ("Who won Best Actor at the 94th Academy Awards?", "Will Smith won Best Actor, his 1st Academy Award.", False),
    ("Who won the 148th Kentucky Derby?", "Rich Strike won the Kentucky Derby on May 7th in Louisville.", False),
    ("Who won Super Bowl LVI?", "The Buccaneers won Super Bowl LV in Tampa.", True),
    ("Who won Super Bowl LVI?", "The Rams won Super Bowl 56 in Inglewood.", False),  # the same number
    ("When did World War II end?", "World War II ended in 1945, after World War I.", False),
    # A year is the year rule's.
    ("Who won the 2022 Citrus Bowl?", "Iowa won the 2021 Citrus Bowl.", False),
])
def test_a_sentence_names_another_edition_only_when_it_never_names_the_asked_one(question: str, sentence: str,
                                                                                   other: bool) -> None:
    assert other_edition(editions_of(question), sentence) is other


def test_editions_are_read_in_linear_time() -> None:
    hostile = "Model 1 " * 20_000 + "x9," * 20_000 + "1,0" * 20_000 + "than 3-inch " * 10_000
    started = time.perf_counter()
    editions = editions_of(hostile)
    other_edition(editions, hostile)
    assert time.perf_counter() - started < 5
