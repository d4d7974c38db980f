"""The extractive mode's question splitter: sub-questions, their queries, the cap, and bad input."""
from __future__ import annotations

import re

import pytest

from pipeline.research.extractive import questions as q
from pipeline.research.extractive.questions import (
    MAX_QUESTION_CHARS,
    content_terms,
    split_question,
    split_question_result,
)
from tests.regex_audit import token_texts


def questions(text: str, **kw) -> list[str]:
    return [p.question for p in split_question(text, **kw)]


# --- splitting -------------------------------------------------------------------------------------------------


def test_a_simple_question_is_one_part_with_itself_and_its_content_words_as_queries():
    [part] = split_question("How many Boeing 787 jets did Emirates order at the Dubai Air Show?")
    assert part.question == "How many Boeing 787 jets did Emirates order at the Dubai Air Show?"
    assert part.queries[0] == part.question
    assert part.queries[1] == "boeing 787 jets emirates order dubai air show"
    assert 2 <= len(part.queries) <= 3
    assert len({q.lower() for q in part.queries}) == len(part.queries)


def test_three_question_marks_give_three_sub_questions():
    parts = questions("How many teachers rallied in Indianapolis? What did they demand? Who is the governor?")
    assert parts == ["How many teachers rallied in Indianapolis?", "What did they demand?", "Who is the governor?"]


def test_a_three_part_question_joined_by_commas_and_and_gives_three_sub_questions():
    parts = questions("Who founded WeWork, when did it cancel its IPO, and how much was SoftBank's rescue worth?")
    assert parts == ["Who founded WeWork?", "When did it cancel its IPO?", "How much was SoftBank's rescue worth?"]


def test_and_splits_only_before_a_clause_of_its_own():
    assert questions("Who founded WeWork and when did it go public?") == ["Who founded WeWork?",
                                                                         "When did it go public?"]
    for whole in ["What is the population of France and Germany?", "Did research and development spending rise?"]:
        assert questions(whole) == [whole]


def test_a_part_leaning_on_a_pronoun_searches_with_the_topic_of_the_question():
    first, second = split_question("Who founded WeWork and when did it go public?")
    assert "wework" in first.queries[1]
    assert second.queries[0] == "When did it go public?"
    assert "wework" in second.queries[1] and "public" in second.queries[1]


def test_a_list_of_three_items_gives_one_question_per_item():
    parts = questions("What were the revenue, profit and headcount of Acme in 2019?")
    assert parts == ["What were the revenue of Acme in 2019?", "What were the profit of Acme in 2019?",
                     "What were the headcount of Acme in 2019?"]


def test_a_list_of_names_keeps_each_name_whole():
    parts = questions("What is the price of Google Stadia, Microsoft xCloud and Apple Arcade?")
    assert parts == ["What is the price of Google Stadia?", "What is the price of Microsoft xCloud?",
                     "What is the price of Apple Arcade?"]


def test_two_verbs_of_one_subject_ask_two_questions():
    assert questions("Where does the band's 2020 tour start and end?") == [
        "Where does the band's 2020 tour start?", "Where does the band's 2020 tour end?"]
    assert questions("When did the team win and lose?") == ["When did the team win?", "When did the team lose?"]
    assert questions("Where was Barack Obama born and raised?") == [
        "Where was Barack Obama born?", "Where was Barack Obama raised?"]
    # Two nouns (after a preposition, after "is" or "was", or with no auxiliary) are one thing asked.
    for whole in ["What did the Fed say about interest rates and inflation?",
                  "What is Taylor Swift's net worth and age?", "What was the company revenue and profit?",
                  "Which band tours cities and towns?",
                  "When did Apple buy Beats and Shazam?",  # names: the list rule's
                  "What is the difference between the tour start and end?"]:
        assert questions(whole) == [whole]


def test_two_things_asked_by_one_wh_word_are_two_parts():
    assert questions("What top speed and EPA range does the Acme Roadster have?") == [
        "What top speed does the Acme Roadster have?", "What EPA range does the Acme Roadster have?"]
    assert questions("Which cities and towns did the storm hit?") == [
        "Which cities did the storm hit?", "Which towns did the storm hit?"]
    # Names, two modifiers of one noun, a comparison, a longer phrase, or no helper verb: one thing asked.
    for whole in ["Which Fargo and Legion creator was in talks to direct the film?",
                  "What Star Wars and Marvel movies are on Disney+?",
                  "What Windows 11 and macOS versions are supported?",
                  "What price, and range does the car have?",
                  "Which NBA and NFL teams did he own?", "What price and range do both cars have?",
                  "What long top speed and range does the car have?",
                  "What price and range and speed does the car have?", "What top speed and range?",
                  "How many cars and trucks did dealers sell?"]:
        assert questions(whole) == [whole]


def test_a_noun_phrase_after_a_comma_and_asks_the_same_what_was():
    assert questions("What was the Jets-Bills score on Nov. 3, 2019, and the Bills' record afterward?") == [
        "What was the Jets-Bills score on Nov. 3, 2019?", "What was the Bills' record afterward?"]
    assert questions("Who was the MVP, and the Bills' head coach?") == ["Who was the MVP?",
                                                                       "Who was the Bills' head coach?"]
    # A clause of its own (a relative word, a helper verb), a bare adverbial, a longer phrase, another opening, a
    # phrase that names nothing, a list, a comparison or a quoted title is not a second subject of "What was".
    for whole in ["Who was the MVP, and the winning coach?", "What is the population of Texas, and the median income?",
                  "What are the capitals of France, Germany, and the Netherlands?",
                  "What is the relationship between the Fed, and the Treasury?",
                  'What is "The Good, the Bad, and the Ugly" about?', "What, and the price?",
                  "What was the price, and the Acme firm which bought it?",
                  "What was the price, and Acme Corp paid it?",
                  "What was the price, and the firm that bought it?", "What was the price, and the firm has gone?",
                  "How many cars did dealers sell in October, and year to date?",
                  "What was the price, and the name of the small firm in Ohio that had been bought?",
                  "What was the price, and the name of the small family firm in the north of Ohio?",
                  "What was the price, and the firm's owner, Acme?", "What did Acme pay, and the price?",
                  "Where was the deal signed, and the price?", "What was the price, and Acme's share?"]:
        assert questions(whole) == [whole]


def test_a_clause_after_a_comma_with_any_auxiliary_is_a_question_of_its_own():
    assert questions("Tell me about Acme Corp, who has its headquarters in Ohio?") == [
        "Tell me about Acme Corp?", "Who has its headquarters in Ohio?"]


def test_a_comparison_is_not_cut_into_items():
    text = "Compare the prices of Google Stadia, Microsoft xCloud and Apple Arcade."
    assert questions(text) == [text]


def test_abbreviations_do_not_end_the_question():
    assert questions("What did Mr. Smith say about the U.S. economy in 2019?") == [
        "What did Mr. Smith say about the U.S. economy in 2019?"]


def test_names_and_numbers_make_a_third_query():
    [part] = split_question('What did "Operation Warp Speed" cost the U.S. in 2020?')
    assert len(part.queries) == 3
    assert '"Operation Warp Speed"' in part.queries[2] and "2020" in part.queries[2]


def test_fragments_without_content_words_are_left_out():
    assert questions("Thanks! Hello. When was Python 3.8 released?") == ["When was Python 3.8 released?"]


# --- the cap -----------------------------------------------------------------------------------------------------


def test_at_most_four_parts_and_the_rest_are_reported_as_dropped():
    text = "Who makes Stadia? Who makes xCloud? Who makes Arcade? Who makes Switch? Who makes Steam? Who makes Quest?"
    result = split_question_result(text)
    assert [p.question for p in result.parts] == ["Who makes Stadia?", "Who makes xCloud?", "Who makes Arcade?",
                                                  "Who makes Switch?"]
    assert result.dropped == ["Who makes Steam?", "Who makes Quest?"]
    assert not result.truncated
    assert split_question(text) == result.parts


def test_max_parts_is_honoured():
    result = split_question_result("Who makes Stadia? Who makes xCloud? Who makes Arcade?", max_parts=2)
    assert len(result.parts) == 2 and result.dropped == ["Who makes Arcade?"]
    assert len(split_question("Who makes Stadia? Who makes xCloud?", max_parts=0)) == 1  # never below one


def test_a_repeated_sub_question_counts_once():
    assert questions("Who makes Stadia? who makes Stadia?") == ["Who makes Stadia?"]


# --- bad input -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   ", "\n\t \n", "?!?"])
def test_empty_input_gives_no_parts(text):
    result = split_question_result(text)
    assert result.parts == [] and result.dropped == [] and not result.truncated


def test_only_stop_words_give_one_part_with_no_queries_for_the_caller_to_name_as_a_gap():
    result = split_question_result("What is it and why would they?")
    assert [(p.question, p.queries) for p in result.parts] == [("What is it and why would they?", [])]
    assert result.dropped == []


def test_a_5000_character_question_is_cut_sanely_and_bounded():
    text = "What did the report say about prices and how did markets react to the news? " * 70
    assert len(text) > 5000
    result = split_question_result(text)
    assert result.truncated
    assert 1 <= len(result.parts) <= 4
    for part in result.parts:
        assert len(part.question) <= MAX_QUESTION_CHARS
        assert all(len(q) <= 200 for q in part.queries)


def test_a_5000_character_word_salad_without_punctuation_is_cut_at_a_space():
    text = " ".join(f"word{i}" for i in range(900))
    result = split_question_result(text)
    assert result.truncated and len(result.parts) == 1
    question = result.parts[0].question
    assert len(question) <= MAX_QUESTION_CHARS + 1 and not question.rstrip("?").endswith(("word", "wor"))
    assert len(result.parts[0].queries[1].split()) <= 12


def test_one_5000_character_token_does_not_break_anything():
    result = split_question_result("x" * 5000 + "?")
    assert result.truncated and len(result.parts) == 1 and len(result.parts[0].question) <= MAX_QUESTION_CHARS + 1


def test_a_german_question_keeps_its_words_as_queries():
    [part] = split_question("Wie viele Menschen leben in Berlin?")
    assert part.queries[0] == "Wie viele Menschen leben in Berlin?"
    assert "berlin" in part.queries[1] and "menschen" in part.queries[1]


def test_chinese_and_arabic_question_marks_split():
    assert questions("柏林有多少人口？柏林墙是什么时候建的？") == ["柏林有多少人口？", "柏林墙是什么时候建的？"]
    assert len(split_question("كم عدد سكان برلين؟ متى بني الجدار؟")) == 2


def test_accents_written_as_combining_marks_stay_inside_the_word():
    assert content_terms("Prive\u0301 cafe\u0301s") == ["prive\u0301", "cafe\u0301s"]


# --- content terms -------------------------------------------------------------------------------------------------


def test_content_terms_are_lowercased_content_words_in_order_without_repeats():
    assert content_terms("The U.S. paid $1,200 for the Widgets, and the widgets were late.") == [
        "us", "paid", "1200", "widgets", "late"]


def test_content_terms_can_be_stemmed_so_forms_of_a_word_match():
    assert content_terms("companies sold activated", stemmed=True) == content_terms(
        "company sell activate", stemmed=True)
    assert content_terms("Hawley's films", stemmed=True) == ["hawley", "film"]


def test_content_terms_keep_repeats_when_asked():
    assert content_terms("rain, rain and more rain", unique=False) == ["rain", "rain", "rain"]


def test_tokenize_gives_each_term_with_its_offsets_in_the_text():
    from pipeline.research.extractive.terms import tokenize

    text = "The U.S. paid $1,200 for Hawley’s films."
    got = list(tokenize(text))
    assert [t for t, _, _ in got] == ["us", "pay", "1200", "hawley", "film"]  # stemmed for matching
    assert [text[s:e] for _, s, e in got] == ["U.S.", "paid", "1,200", "Hawley’s", "films"]


# --- the linear forms of former patterns give what they gave (tests/test_regex_linear.py audits the time) ----------


def test_joins_lists_and_entities_are_read_as_the_former_patterns_read_them() -> None:
    # Each former pattern took time quadratic in a space run or in a long number.
    join = re.compile(r",?\s+(?:and(?:\s+also)?|as\s+well\s+as|plus|but)\s+(?=(?P<a>\w+)(?:\s+(?P<a2>\w+))?"
                      r"(?:\s+(?P<a3>\w+))?)|;\s*(?=(?P<b>\w+))|,\s+(?=(?P<c>what|when|where|why|how|which|who)\b"
                      r"(?:\s+(?P<c2>\w+))?(?:\s+(?P<c3>\w+))?)", re.I)
    list_sep = re.compile(r",\s+(?:(?:and|or)\s+)?|\s+(?:and|or)\s+", re.I)
    entity = re.compile(r"\b(?:[A-Z][\w'’.-]*|\d[\d.,%]*\w*)"
                        r"(?:\s+(?:[A-Z][\w'’.-]*|\d[\d.,%]*|(?:of|de|la|von|van)\b))*")
    particles = re.compile(r"(?:\s+(?:of|de|la|von|van))+$")
    tokens = [" ", "  ", "\t", ",", ";", "and", "And", "also", "as", "well", "plus", "but", "what", "who", "x", "Bo",
              "1", "2.5", "%", "of", "de", "von", "la", "'", "-", "."]
    for text in token_texts(tokens, count=4000):
        assert [(m.span(), m.groupdict()) for m in join.finditer(text)] == [
            (m.span(), m.groupdict()) for m in q._JOIN.finditer(text)], text
        assert [m.span() for m in list_sep.finditer(text)] == [m.span() for m in q._LIST_SEP.finditer(text)]
        assert [m.span() for m in entity.finditer(text)] == [m.span() for m in q._ENTITY.finditer(text)]
        assert q._without_last_particles(text) == particles.sub("", text), text
    assert q._without_last_particles("Bank of  de") == "Bank"
    assert q._without_last_particles("Angola") == "Angola"
