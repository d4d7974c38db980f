"""The extractive mode's sentence splitter and selector: exact offsets, relevance, threshold, diversity."""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from pipeline.research.extractive import sentences
from pipeline.research.extractive.select import (
    MIN_PICK_CHARS,
    PageText,
    Pick,
    SentenceIndex,
    select_sentences,
    split_sentences,
)
from pipeline.research.extractive.sentences import MAX_SENTENCE_CHARS
from tests.regex_audit import token_texts

REPO = Path(__file__).resolve().parent.parent
NEWS = REPO / "benchmarks" / "corpora" / "news"


def texts(text: str) -> list[str]:
    spans = split_sentences(text)
    for s in spans:
        assert text[s.start:s.end] == s.text
        assert s.text == s.text.strip() and s.text
    return [s.text for s in spans]


def page(source_id: str, text: str, title: str = "", published: str | None = None) -> PageText:
    return PageText(source_id=source_id, title=title, text=text, published=published)


def assert_exact(picks: list[Pick], pages: list[PageText]) -> None:
    by_id = {p.source_id: p for p in pages}
    for pick in picks:
        assert by_id[pick.source_id].text[pick.start:pick.end] == pick.text
        assert MIN_PICK_CHARS <= len(pick.text) <= MAX_SENTENCE_CHARS


# --- split_sentences -------------------------------------------------------------------------------------------------


def test_offsets_are_exact_through_curly_quotes_abbreviations_decimals_and_newlines():
    text = ("  Mr. Smith paid $3.5 million for the U.S. unit on Jan. 5. “We won,” he said. “Really?” she asked.\n\n"
            "J. K. Rowling wrote it in 1997.\u00a0It sold well!\n"
            "Headline Without A Stop\n"
            "• A bullet point that ends here.\n")
    assert texts(text) == [
        "Mr. Smith paid $3.5 million for the U.S. unit on Jan. 5.",
        "“We won,” he said.",
        "“Really?” she asked.",
        "J. K. Rowling wrote it in 1997.",
        "It sold well!",
        "Headline Without A Stop",
        "A bullet point that ends here.",
    ]


def test_a_closing_quote_stays_with_its_sentence():
    assert texts('He said "Go home." Then he left. The end.') == ['He said "Go home."', "Then he left.", "The end."]
    assert texts("Er sagte: „Nein.“ Dann ging er.") == ["Er sagte: „Nein.“ Dann ging er."]  # „ is not an opener here


def test_a_dotted_acronym_ends_a_sentence_only_before_a_typical_sentence_start():
    assert texts("He moved to the U.S. The move was hard.") == ["He moved to the U.S.", "The move was hard."]
    assert texts("The U.S. Army said no.") == ["The U.S. Army said no."]
    assert texts("It opens at 5 p.m. Tickets are free.") == ["It opens at 5 p.m. Tickets are free."]


def test_hard_wrapped_lines_run_on_and_other_lines_are_paragraphs():
    text = "The committee met on Tuesday and\ndecided to wait.\nNext Item\nThe vote is tomorrow."
    assert texts(text) == ["The committee met on Tuesday and\ndecided to wait.", "Next Item", "The vote is tomorrow."]


def test_chinese_sentence_ends_need_no_space():
    assert texts("柏林有多少人口。柏林墙是什么时候建的？好。") == ["柏林有多少人口。", "柏林墙是什么时候建的？", "好。"]


def test_a_very_long_sentence_is_cut_at_clause_boundaries_without_cutting_words():
    clause = "the committee reviewed the budget for the coming year in great detail"
    text = "; ".join([clause] * 15) + "."
    spans = split_sentences(text)
    assert len(spans) >= 3
    for s in spans:
        assert text[s.start:s.end] == s.text and len(s.text) <= MAX_SENTENCE_CHARS
        assert s.start == 0 or not text[s.start - 1].isalnum()
        assert s.end == len(text) or not text[s.end].isalnum()
    assert all(s.text.endswith(";") for s in spans[:-1])
    words = " ".join(s.text for s in spans).replace(";", "").replace(".", "").split()
    assert words == text.replace(";", "").replace(".", "").split()


def test_a_long_run_without_any_break_is_cut_hard():
    spans = split_sentences("x" * 1000)
    assert [len(s.text) for s in spans] == [400, 400, 200]


@pytest.mark.parametrize("text", ["", "   \n\n  ", "\u00a0"])
def test_empty_text_has_no_sentences(text):
    assert split_sentences(text) == []


# --- select_sentences ---------------------------------------------------------------------------------------------

TEACHERS = page("S1", (
    "Thousands of teachers wearing red rallied at the Indiana Statehouse on Tuesday.\n"
    "The rally closed many school districts across the state.\n"
    "Nearly 300 school districts closed because of the rally, according to teachers unions.\n"
    "Teachers chanted and held handmade signs on the Statehouse steps.\n"
    "The governor was at a conference in Florida."), title="Teachers rally at the Indiana Statehouse")
STADIA = page("S2", (
    "Google Stadia launched on Tuesday for $129 with a controller.\n"
    "The service streams games to phones and televisions.\n"
    "Reviewers said the launch line-up was thin."), title="Google Stadia launches")
TRAVEL = page("S3", (
    "The city opened a new bridge over the river last spring.\n"
    "Cyclists and walkers can cross it for free."), title="A new bridge")


def test_the_sentence_that_answers_is_picked_among_distractors():
    pages = [TEACHERS, STADIA, TRAVEL]
    picks = select_sentences("How many school districts closed because of the Indiana teachers' rally?", pages)
    assert picks and picks[0].source_id == "S1"
    assert picks[0].text == "Nearly 300 school districts closed because of the rally, according to teachers unions."
    assert_exact(picks, pages)
    assert all(p.source_id == "S1" for p in picks)
    assert picks == sorted(picks, key=lambda p: -p.score) or picks[0].score >= max(p.score for p in picks[1:])


def test_an_unrelated_question_picks_nothing():
    pages = [TEACHERS, STADIA, TRAVEL]
    assert select_sentences("Who won the 2019 Tour de France?", pages) == []
    assert select_sentences("What is the population of Mars?", pages) == []


def test_a_question_sharing_one_common_word_with_the_pages_picks_nothing():
    # "Tuesday" is on two pages, but the question is about something they never mention
    assert select_sentences("What happened at the Tokyo marathon on Tuesday?", [TEACHERS, STADIA, TRAVEL]) == []


def test_numbers_are_preferred_when_the_question_asks_how_many():
    pages = [page("S1", "Many teachers attended the Indiana rally on the Statehouse lawn.\n"
                        "About 15,000 teachers attended the Indiana rally, the union said.")]
    picks = select_sentences("How many teachers attended the Indiana rally?", pages, k=1)
    assert [p.text for p in picks] == ["About 15,000 teachers attended the Indiana rally, the union said."]


def test_dates_are_preferred_when_the_question_asks_when():
    pages = [page("S1", "The Dragonfly mission will study Titan and its chemistry closely.\n"
                        "The Dragonfly mission will reach Titan in 2034, NASA said.")]
    picks = select_sentences("When will the Dragonfly mission reach Titan?", pages, k=1)
    assert picks[0].text == "The Dragonfly mission will reach Titan in 2034, NASA said."


def test_the_answer_sentence_may_lack_words_the_rest_of_its_page_supplies():
    pages = [page("S1", "The 2020 Audi e-tron Sportback made its debut at the LA Auto Show this week.\n"
                        "Audi will sell the e-tron Sportback in the US next spring.\n"
                        "Top speed is an electronically-limited 124 mph."), TRAVEL, STADIA]
    picks = select_sentences("What is the top speed of the Audi e-tron Sportback?", pages)
    assert "Top speed is an electronically-limited 124 mph." in [p.text for p in picks]


def test_mmr_skips_a_near_duplicate_and_takes_the_next_relevant_sentence():
    wire = "WeWork plans to cut 4,000 jobs this week as part of its restructuring, people familiar said."
    pages = [page("S1", wire), page("S2", wire.replace("people familiar said", "sources said")),
             page("S3", "The WeWork restructuring will cut 4,000 jobs in areas outside its core business.")]
    picks = select_sentences("How many jobs will WeWork cut in its restructuring?", pages, k=2)
    assert len(picks) == 2
    assert {p.source_id for p in picks} in ({"S1", "S3"}, {"S2", "S3"})
    assert_exact(picks, pages)


def test_at_most_two_picks_per_page_by_default():
    text = ("The Indiana teachers rally filled the Statehouse lawn on Tuesday morning.\n"
            "Buses brought teachers from Evansville to the Indiana Statehouse rally before dawn.\n"
            "Union leaders spoke to the rally from the Statehouse steps about pay.\n"
            "Police said the Indiana rally at the Statehouse stayed peaceful all day.\n"
            "Teachers at the rally wore red and carried signs around the Indiana Statehouse.")
    question = "What happened at the Indiana teachers rally at the Statehouse?"
    assert len(select_sentences(question, [page("S1", text)], k=5)) == 2
    assert len(select_sentences(question, [page("S1", text)], k=5, per_page=4)) == 4


def test_sentences_shorter_than_the_quote_minimum_are_never_picked():
    pages = [page("S1", "Stadia: $129.\nStadia costs $129 at launch in the US.")]
    picks = select_sentences("What does Stadia cost?", pages)
    assert [p.text for p in picks] == ["Stadia costs $129 at launch in the US."]


def test_a_pronoun_sub_question_can_use_the_topic_of_the_question():
    rocket = page("S3", "The rocket launched from Florida on Saturday morning after two delays.")
    pages = [TEACHERS, STADIA, rocket]
    alone = select_sentences("When did it launch?", pages)
    assert {p.source_id for p in alone} == {"S2", "S3"}  # "launch" alone cannot tell the two apart
    picks = select_sentences("When did it launch?", pages, extra_terms=["google", "stadia"])
    assert picks[0].text == "Google Stadia launched on Tuesday for $129 with a controller."


def test_a_sentence_index_can_be_reused_across_sub_questions():
    pages = [TEACHERS, STADIA, TRAVEL]
    index = SentenceIndex.build(pages)
    for q in ["How much does Google Stadia cost?", "How many school districts closed for the rally?"]:
        assert select_sentences(q, index) == select_sentences(q, pages)


@pytest.mark.parametrize("question", ["", "   ", "What is it and why?", "?"])
def test_a_question_without_content_words_picks_nothing(question):
    assert select_sentences(question, [TEACHERS, STADIA]) == []


def test_no_pages_or_empty_pages_pick_nothing():
    assert select_sentences("How many districts closed?", []) == []
    assert select_sentences("How many districts closed?", [page("S1", ""), page("S2", " \n ")]) == []
    assert select_sentences("How many districts closed?", [TEACHERS], k=0) == []


def test_a_german_question_finds_the_german_sentence():
    pages = [page("S1", "Die Mauer wurde 1961 gebaut und fiel 1989.\nBerlin hat heute rund 3,7 Millionen Einwohner."),
             STADIA]
    picks = select_sentences("Wann wurde die Mauer in Berlin gebaut?", pages, k=1)
    assert [p.text for p in picks] == ["Die Mauer wurde 1961 gebaut und fiel 1989."]


def test_offsets_stay_exact_when_the_page_repeats_a_sentence():
    text = "Intro here.\nStadia costs $129 at launch in the US.\nMore text.\nstadia costs $129 at launch in the US."
    [pick] = select_sentences("What does Stadia cost at launch?", [page("S1", text)])
    assert pick.start == text.index("Stadia costs") and text[pick.start:pick.end] == pick.text


# --- the shipped news corpus ---------------------------------------------------------------------------------------


def _news_pages(urls: list[str]) -> list[PageText]:
    import trafilatura
    from trafilatura.utils import load_html

    entries = {e["url"]: e for e in map(json.loads, (NEWS / "manifest.jsonl").read_text("utf-8").splitlines())}
    pages = []
    for i, url in enumerate(urls):
        html = gzip.decompress((NEWS / entries[url]["path"]).read_bytes()).decode("utf-8", "replace")
        text = trafilatura.extract(load_html(html), url=url, favor_precision=True, include_tables=True,
                                   include_comments=False, deduplicate=False) or ""
        pages.append(PageText(source_id=f"S{i + 1}", title="", text=text))
    return pages


@pytest.mark.skipif(not (NEWS / "manifest.jsonl").exists(), reason="the news corpus is not in this checkout")
def test_on_real_news_pages_the_answer_sentence_is_picked_and_an_unrelated_question_gets_nothing():
    gold = "https://www.cnbc.com/2019/11/20/emirates-inks-order-for-30-boeing-787-jets-talks-expansion-plans.html"
    others = ["https://www.reuters.com/article/us-global-markets/asian-shares-soft-as-trade-doubts-creep-back-in-"
              "idUSKBN1XT00B",
              "https://www.space.com/jupiter-moon-europa-water-vapor-confirmed.html",
              "https://www.detroitnews.com/story/news/nation/2019/11/19/thousands-teachers-pack-indiana-statehouse-"
              "protest/40651467/"]
    entries = [json.loads(line)["url"] for line in (NEWS / "manifest.jsonl").read_text("utf-8").splitlines()]
    urls = [gold] + [u for u in entries if any(u.startswith(o[:60]) for o in others)]
    pages = _news_pages(urls)
    picks = select_sentences("How many Boeing 787-9 Dreamliner jets did Emirates agree to buy?", pages)
    assert picks and picks[0].source_id == "S1" and "30 of Boeing" in picks[0].text
    assert_exact(picks, pages)
    assert select_sentences("Who won the 2019 Tour de France?", pages) == []


def test_the_extractive_gold_set_points_at_pages_of_the_news_corpus() -> None:
    suite = json.loads((REPO / "benchmarks" / "perf" / "extractive_gold.json").read_text("utf-8"))
    urls = {json.loads(line)["url"] for line in (NEWS / "manifest.jsonl").read_text("utf-8").splitlines()}
    kinds = [item["kind"] for item in suite]
    assert kinds.count("factual") == 20 and kinds.count("unanswerable") == 3 and kinds.count("conflict") >= 1
    for item in suite:
        if item["kind"] == "factual":
            assert item["gold_url"] in urls and all(t in item["answer_sentence"] for t in item["answer_terms"])
        if item["kind"] == "conflict":
            assert len(item["sources"]) == 2 and all(s["url"] in urls for s in item["sources"])


def test_a_page_that_never_names_the_subject_of_the_question_is_not_quoted() -> None:
    home_depot = page("S1", "Home Depot stock fell after the retailer reported third-quarter earnings for 2019. "
                      "Revenue in the third quarter of 2019 rose to 27.2 billion dollars, the company said.",
                      title="Home Depot Stock Is Falling After Its Earnings Release")
    assert select_sentences("What was Tesla's revenue in the third quarter of 2019?", [home_depot]) == []
    picks = select_sentences("What was Home Depot's revenue in the third quarter of 2019?", [home_depot])
    assert any("27.2 billion" in p.text for p in picks)


LONG_QUESTION = ("According to the Associated Press report from Buffalo, how many years in federal prison does Patrick "
                 "W. Carlineo Jr., the Addison, New York man who pleaded guilty in November 2019 to threatening to "
                 "kill Rep. Ilhan Omar during a phone call to her Washington office, face when he is sentenced?")


def test_a_long_question_gets_the_sentence_that_answers_it() -> None:
    assert len(LONG_QUESTION.split()) >= 40
    pages = [
        page("S1", "Patrick W. Carlineo Jr. pleaded guilty on Monday in federal court in Buffalo. He admitted calling "
                   "the office of Rep. Ilhan Omar in March and threatening to kill her. Carlineo faces up to 10 years "
                   "in federal prison and a fine of 250,000 dollars when he is sentenced in February. His lawyer "
                   "declined to comment after the hearing.", title="Addison man pleads guilty to threatening Omar"),
        page("S2", "Rep. Ilhan Omar spoke at a rally in Minneapolis on Saturday. She thanked supporters for their "
                   "messages and spoke about health care for two hours.", title="Omar rallies supporters"),
    ]
    picks = select_sentences(LONG_QUESTION, pages)
    assert picks and picks[0].text.startswith("Carlineo faces up to 10 years in federal prison")
    assert_exact(picks, pages)


def test_a_near_miss_that_says_little_of_the_question_is_left_to_a_gap() -> None:
    question = "How many electric buses does the Portland transit agency operate on its downtown routes in winter?"
    near = [page("S1", "The Portland transit agency has 40 employees in its customer service office. The office "
                       "opens at nine.")]
    assert select_sentences(question, near) == []  # a figure about the agency, not about its buses
    answer = [page("S1", "The Portland transit agency operates 40 electric buses on its downtown routes in winter. "
                         "The office opens at nine.")]
    assert [p.text for p in select_sentences(question, answer)] == [answer[0].text.split(" The office")[0]]


# --- the linear forms of former patterns give what they gave (tests/test_regex_linear.py audits the time) ----------


def test_sentence_ends_words_and_paragraphs_are_read_as_before() -> None:
    # The former _END and _LAST_WORD restarted at each character of a long run (quadratic), and paragraphs were
    # built by copying the paragraph so far at each hard-wrapped line (quadratic); the reference keeps that form,
    # with the later rule that a line ending on a word of _RUN_ON runs on.
    end = re.compile(r"[.!?…]+[\"'”’»)\]]*(?=\s|$)|[。！？]+[」』”’)]*")
    last_word = re.compile(r"[\w.'’-]*$")
    line = re.compile(r"[^\n]+")

    def former_blocks(text: str) -> list[tuple[int, int]]:
        blocks: list[tuple[int, int]] = []
        for m in line.finditer(text):
            if not m.group().strip():
                continue
            if blocks:
                prev = text[blocks[-1][0]:blocks[-1][1]].rstrip()
                between = text[blocks[-1][1]:m.start()]
                run_on = prev.split()[-1] in sentences._RUN_ON and m.group()[:1].isalpha()
                if between.count("\n") == 1 and (m.group()[:1].islower() and prev and prev[-1] not in ".!?:;\"”’)]"
                                                  or run_on):
                    blocks[-1] = (blocks[-1][0], m.end())
                    continue
            blocks.append((m.start(), m.end()))
        return blocks

    tokens = [" ", "\n", "\n\n", ".", "..", "!", "?", "…", '"', "”", ")", "。", "」", "a", "B", "U.S", "'", "-", ":",
              "and", "      "]
    for text in token_texts(tokens, count=3000):
        assert [m.span() for m in end.finditer(text)] == [m.span() for m in sentences._END.finditer(text)], text
        assert sentences._blocks(text) == former_blocks(text), text
        for stop in range(len(text) + 1):
            window = text[max(0, stop - 40):stop].removesuffix("\n")
            old = last_word.search(text, max(0, stop - 40), stop)
            new = sentences._WORD_REVERSED.match(window[::-1])
            assert (old and old.group()) == (new and new.group()[::-1]), (text, stop)


# --- names, titles and kinds ------------------------------------------------------------------------------------------


def test_a_which_stadium_question_is_not_answered_by_a_sentence_that_names_no_stadium() -> None:
    question = "In which stadium will the final of the 2028 Harbour Cup be played?"
    near = [page("S1", "The final of the 2028 Harbour Cup will be played in London, the organisers said on Monday.",
                 title="Harbour Cup final set for London")]
    assert select_sentences(question, near) == []  # a city, not a stadium: another question's answer
    answer = [page("S1", "The final of the 2028 Harbour Cup will be played at Wembley Stadium in London, the "
                         "organisers said.", title="Harbour Cup final set for London")]
    assert [p.text for p in select_sentences(question, answer)] == [answer[0].text]


def test_a_which_city_question_needs_no_word_city_in_its_answer() -> None:
    question = "In which city will the final of the 2028 Harbour Cup be played?"
    pages = [page("S1", "The final of the 2028 Harbour Cup will be played in London, the organisers said on Monday.",
                  title="Harbour Cup final set")]
    assert [p.text for p in select_sentences(question, pages)] == [pages[0].text]


def test_a_page_that_names_a_person_without_their_title_is_about_them() -> None:
    # "President" is rarer than "Trump" on these pages: read as the name's rarest word, it hid the page that says
    # only "Trump-imposed tariffs".
    question = "How much revenue had President Trump's tariffs raised through June 2019, according to the tally?"
    pages = [page("S1", "Revenues from the Trump-imposed tariffs have totaled about $63 billion through June 2019, "
                        "the tally shows.", title="A guide to tariffs"),
             page("S2", "President Trump met farmers in Iowa. Trump said farmers would be paid. Trump spoke for an "
                        "hour about the harvest.", title="Trump in Iowa")]
    picks = select_sentences(question, pages)
    assert picks and picks[0].source_id == "S1" and "$63 billion" in picks[0].text


def test_a_name_is_found_by_the_rarest_of_its_words_that_the_pages_use() -> None:
    # No page says "Tova": the pages' word for her is "Noel", the rarer of her name's words that they use.
    question = "How much bond did Tova Noel, the prison guard, have to post?"
    pages = [page("S1", "Guard Noel pleaded not guilty on Tuesday. Noel was released on the condition that she post "
                        "a 100,000 dollar bond within a week.", title="Guard pleads not guilty")]
    picks = select_sentences(question, pages)
    assert picks and "100,000 dollar bond" in picks[0].text


def test_a_page_that_names_a_person_by_their_surname_only_is_about_them() -> None:
    # Only S1 says "Marta": her given name is the rarer of her name's words, yet S2, which calls her "Tessaro" as
    # pages do after a first mention, is about her too, and its other date is a conflict the report must show.
    question = "On what date did Marta Tessaro say she learned about the recall?"
    pages = [page("S1", "Marta Tessaro spoke to the committee on Tuesday. Tessaro said she learned about the recall on "
                        "July 18 and acted at once.", title="Tessaro testifies"),
             page("S2", "Tessaro said she learned about the recall on July 12 and acted at once. The recall covered "
                        "many cars.", title="Recall notes")]
    picks = select_sentences(question, pages)
    assert {(p.source_id, "July 18" in p.text, "July 12" in p.text) for p in picks} >= {
        ("S1", True, False), ("S2", False, True)}


# Pages about nothing a question here asks: each answer must be picked from beside them.
WEATHER = page("S2", "Rain is expected in the city on Tuesday. The river may flood.", title="Weather")
COUNCIL = page("S3", "The city council approved the new budget on Monday by a vote of 7-2.\n"
                     "The mayor said the plan would fund two new libraries.", title="Council votes on budget")


def best_beside_weather(question: str, text: str, title: str) -> str:
    """The best pick for `question` from a page of `text` beside an unrelated one; fails when nothing is picked."""
    picks = select_sentences(question, [page("S1", text, title=title), WEATHER])
    assert picks
    return picks[0].text


def test_a_name_whose_later_words_no_page_uses_is_marked_by_its_first() -> None:
    # "Corrigan Brothers" is shaped like a person's name; its first word marks it when no page says "Brothers".
    assert "Ada Quill" in best_beside_weather("Which producer did The Corrigan Brothers record with in 2019?",
                                              "The Corrigans recorded with producer Ada Quill in 2019, the band said.",
                                              "Corrigans back in the studio")


def test_a_title_before_the_name_asked_about_need_not_be_repeated_by_the_answer() -> None:
    assert best_beside_weather(
        "How old is Corvid co-founder Lena Marsh?",
        "Lena Marsh co-founded Corvid in 2009. Marsh, 52, said Corvid would hire again in spring.",
        "Corvid to hire").startswith("Marsh, 52")


def test_a_line_of_code_after_a_prompt_is_no_answer_when_a_sentence_gives_one() -> None:
    question = "What range of digest sizes can BLAKE2b and BLAKE2s each produce?"
    answer = "BLAKE2 has configurable size of digests up to 64 bytes for BLAKE2b and up to 32 bytes for BLAKE2s."
    pages = [page("S1", f"{answer}\nTo produce a shorter digest, set its size:\n>>> h = blake2b(digest_size=20)\n"
                        ">>> blake2s(digest_size=10).hexdigest()", title="hashlib")]
    picks = select_sentences(question, pages)
    assert picks and picks[0].text == answer


def test_a_past_event_is_not_answered_by_a_plan_or_a_hope() -> None:
    """A part that asks what happened ("was signed by") is not answered by a sentence that says it may happen."""
    part = "On what date was the merger agreement signed by Acme and Globex?"
    hoped = page("S1", "Acme said on Monday that it hoped to sign the merger agreement with Globex in March. "
                       "Talks with Globex will resume next week.", "Acme and Globex near a merger")
    assert select_sentences(part, [hoped]) == []
    signed = page("S2", "Acme and Globex signed the merger agreement on March 3 in Zurich.", "Acme and Globex merge")
    picks = select_sentences(part, [hoped, signed])
    assert [p.source_id for p in picks] == ["S2"]


def test_when_something_happened_is_not_told_by_a_sentence_that_only_expects_it() -> None:
    """"When did Acme close its purchase ...?": a sentence that says "close" only as expected does not answer; one
    that tells it in other words ("completed") still does."""
    part = "When did Acme close its purchase of Globex?"
    expected = page("S1", "Acme said the purchase of Globex is expected to close in the third quarter of 2020. "
                          "Globex makes valves.", "Acme to buy Globex")
    assert select_sentences(part, [expected, WEATHER]) == []
    completed = page("S3", "Acme completed its purchase of Globex on March 3, 2020.", "Acme buys Globex")
    assert [p.source_id for p in select_sentences(part, [expected, completed, WEATHER])] == ["S3"]
    closed = page("S4", "Acme closed its purchase of Globex on March 3, after it had hoped to close in January.",
                  "Deal done")
    assert [p.source_id for p in select_sentences(part, [closed, WEATHER])] == ["S4"]
    until = page("S6", "Acme did not close its purchase of Globex until March 3, 2020, when regulators agreed.",
                 "Deal done at last")
    assert [p.source_id for p in select_sentences(part, [until, WEATHER])] == ["S6"]
    # Only a word of the verb's own root is held to this: "will confirm" is no "say" told as expected.
    chart = page("S5", "Maley looked at Coty's chart. If the stock can break above $13.60, that will confirm its "
                       "long-term uptrend.", "Coty's chart")
    assert select_sentences("What price did Maley say Coty must break above?", [chart, WEATHER])


def test_another_edition_of_what_is_asked_is_no_answer() -> None:
    """"How much does the Zephyr 7 cost?" is not answered by the Zephyr 6's price, though its page names the Zephyr
    7; a sentence that names both editions may answer, and a question that names two takes either."""
    part = "How much does the Zephyr 7 phone cost?"
    older = page("S1", "The Zephyr 6 phone costs $499 and ships in May. Reviewers liked its screen.",
                 "Zephyr 6 review: why not wait for the Zephyr 7")
    assert select_sentences(part, [older, WEATHER]) == []
    newer = page("S3", "The Zephyr 7 phone costs $599, $100 more than the Zephyr 6 did.", "Zephyr 7 launched")
    assert [p.source_id for p in select_sentences(part, [older, newer, WEATHER])] == ["S3"]
    both = "How much more does the Zephyr 7 phone cost than the Zephyr 6 phone?"
    assert select_sentences(both, [older, WEATHER])


def test_a_sentence_that_names_the_person_asked_for_by_their_role_says_what_is_asked() -> None:
    """"Which American professor did the rebels free?": the page tells it as "handed over", not "freed"; that it
    says "professors" beside the names is what makes it about what is asked."""
    part = "Which American professor did the rebels free?"
    freed = page("S1", "American Kevin Ross and Australian Tim Marks, both professors at the university in Kabul, were "
                       "handed over to US forces on Tuesday.", "Rebels hand over two hostages")
    picks = select_sentences(part, [freed, WEATHER])
    assert picks and "Kevin Ross" in picks[0].text
    assert select_sentences(part, [page("S1", "The rebels, who are holding American hostages, met officials in Doha "
                                              "on Tuesday.", "Talks in Doha"), WEATHER]) == []
    # A word that names nobody's role says nothing of what is asked: "a man from Leeds" is not the man freed.
    fair = page("S1", "John Smith, a man from Leeds, won a prize at the fair. The rebels met in Doha.", "Fair in Leeds")
    assert not any("John Smith" in p.text for p in select_sentences("Which man did the rebels free?", [fair, WEATHER]))


def test_a_purpose_is_no_plan() -> None:
    from pipeline.research.extractive.select import _happened

    assert _happened(["replac"], "The print() function, with keyword arguments to replace the old statement.")
    assert _happened(["report"], "He is in talks, according to reports from the Wrap.")
    assert not _happened(["sign"], "He hoped to sign it in Chile.")
    assert not _happened(["sign"], "The deal is expected to be signed soon.")
    assert not _happened(["sign"], "The deal has not signed yet.")
    for unreal in ["Acme must sign the deal.", "Acme cannot sign the deal.", "Acme won’t sign the deal."]:
        assert not _happened(["sign"], unreal)  # an obligation, an inability, a refusal (curly apostrophe)
    # A negation with "until" after the verb says when it did happen; "until" before it, or after a modal, does not.
    assert _happened(["sign"], "Acme did not sign the deal until March 3.")
    assert _happened(["sign"], "The deal was not signed until March.")
    assert not _happened(["sign"], "Until March, Acme did not sign the deal.")
    assert not _happened(["lift"], "Police would keep the cordon and not lift it until the items were removed.")
    assert _happened(["sign"], "In May, Acme, which may face fines, did not sign the deal until June 3.")
    assert not _happened(["sign"], "Acme did not sign the deal, saying it would wait until March.")
    assert not _happened(["sign"], "The deal was not signed; the old contract runs until 2030.")
    assert not _happened(["sign"], "The deal has not been signed until now.")
    assert not _happened(["sign"], "Acme did not and will not sign until March.")
    assert not _happened(["sign"], "The deal was not signed and would wait until March.")


def test_a_part_about_an_earlier_answer_waits_for_it() -> None:
    """"Whom did it beat?": "it" is the answer of the part before; a page that names no winner of the 2021 cup
    answers neither part (nor does the 2020 final)."""
    from pipeline.research.extractive.questions import split_question_result

    parts = [p.part for p in split_question_result(
        "Which nation won the 2021 Harbor Cup in Oslo, and whom did it beat in the final?").parts]
    assert len(parts) == 2 and parts[1] is not None and parts[1].answer_of is parts[0]
    pages = [page("S1", "OSLO - Norway reached the Harbor Cup final on Saturday, beating Chile 2-1 in the semifinal.",
                  "Norway into the 2021 Harbor Cup final"),
             page("S2", "Sweden beat Japan 3-1 in the Harbor Cup final in 2020, its first title.",
                  "Sweden wins the 2020 Harbor Cup")]
    assert all(p is not None and select_sentences(p, pages) == [] for p in parts)


def test_a_hard_wrapped_line_ending_on_and_runs_on_before_a_capital() -> None:
    text = "(Contributed by Ada Byron, Tim Berners and\nGrace Hopper in bpo-101.)\nA new line starts here."
    assert texts(text) == ["(Contributed by Ada Byron, Tim Berners and\nGrace Hopper in bpo-101.)",
                           "A new line starts here."]
    assert texts("Menu\nNews\nSport") == ["Menu", "News", "Sport"]  # lines with no sentence to run on stay apart
    assert texts("Tim Berners and" + " " * 14 + "\nGrace Hopper.") == ["Tim Berners and" + " " * 14 + "\nGrace Hopper."]
    assert texts("Flights to Toronto" + " " * 14 + "\nBoarding now.") == ["Flights to Toronto", "Boarding now."]


def test_a_page_of_the_site_a_part_names_is_that_site_s_own_word() -> None:
    """"What rating did FactDesk give?": on factdesk.org a sentence need not say "FactDesk" (its own page does)."""
    part = "What rating did FactDesk give the senator's claim about border seizures?"
    text = "The senator spoke in Ohio on Friday. We rate the claim about border seizures Half True."
    own = PageText(source_id="S1", title="Fact-check: border seizures", text=text, site="www.factdesk.org")
    assert [p.text for p in select_sentences(part, [own], k=1)] == [
        "We rate the claim about border seizures Half True."]
    other = PageText(source_id="S1", title="Fact-check: border seizures", text=text, site="www.elsewhere.org")
    assert select_sentences(part, [other]) == []


def test_a_sentence_that_restates_the_part_may_tell_its_verb_in_other_words() -> None:
    """"Which executive blamed a coding glitch for the outage?" is answered by "X said a coding glitch led to the
    outage"; a sentence that says only one of the part's words in other verbs is not, nor is a hope of it."""
    part = "Which Globex executive blamed overwhelming demand and a coding glitch for the streaming outage?"
    said = ("Globex executive Dana Reyes said overwhelming demand and a coding glitch led to the streaming outage "
            "last week.")
    other = "Globex executive Sam Lee said the outage was over."
    picks = select_sentences(part, [page("S1", f"{said} {other}", "Globex streaming outage")])
    assert [p.text for p in picks] == [said]
    hedged = "When was the streaming outage fixed by Globex engineers after overwhelming demand and a coding glitch?"
    filler = " The office opens at nine. Sales rose in May."
    ended = ("Globex engineers ended the streaming outage, caused by overwhelming demand and a coding glitch, on "
             "March 3, 2020.")
    assert [p.text for p in select_sentences(hedged, [page("S1", ended + filler, "Globex outage")])] == [ended]
    maybe = ended.replace("ended", "may end")
    assert select_sentences(hedged, [page("S1", maybe + filler, "Globex outage")]) == []


def test_a_sentence_that_names_the_answer_s_kind_comes_first() -> None:
    """"In which journal was the study published?": the sentences that say "journal" beside a title answer it; the
    ones that only restate the study come after them."""
    part = "In which journal was the study published that found rates of sleep loss rose among teenage gamers?"
    restating = ("Rates of sleep loss have risen among teenage gamers in Ohio, according to a study by Ohio State "
                 "University. Sleep loss among teenage gamers rose by 12 percent, the Ohio State study found.")
    naming = "The authors of the study published in the journal Sleep Medicine Reports argued for limits."
    picks = select_sentences(part, [page("S1", f"{restating} {naming}", "Sleep loss rose among teenage gamers")], k=2)
    assert picks and picks[0].text == naming


def test_shared_with_a_reporter_is_telling_them() -> None:
    part = "Which Acme project manager told CarNews.com how engineers improved chassis rigidity on the Roadster?"
    said = ("Acme Project Manager Rin Sato shared with CarNews.com that they have improved chassis rigidity on the "
            "Roadster by adding braces.")
    picks = select_sentences(part, [page("S1", f"{said} The Roadster goes on sale in May.", "Acme Roadster")])
    assert [p.text for p in picks] == [said]


def test_a_count_counts_what_the_part_asks_about() -> None:
    """"How many subscribers ...?" is not answered by a count of games nor by a monthly price."""
    part = "How many subscribers did the Orbit game streaming service sign up during its launch week?"
    near = page("S1", "Orbit launched with 22 games during its launch week. The Orbit service costs $9.99 a month for "
                      "subscribers. Reviews of the streaming service were mixed.", "Orbit streaming service launches")
    assert select_sentences(part, [near]) == []
    tens = "Orbit signed up 12 subscribers on its first day, each paying $120 a year, during its launch week."
    dozen = page("S2", f"{tens} Reviews of the streaming service were mixed.", "Orbit streaming service launches")
    assert [p.text for p in select_sentences(part, [near, dozen])] == [tens]  # "12" is a count; "$120" a price
    said = "Orbit signed up 1.2 million subscribers during its launch week, the company said."
    answer = page("S2", f"{said} Reviews of the streaming service were mixed.", "Orbit streaming service launches")
    assert [p.text for p in select_sentences(part, [near, answer])] == [said]


def test_how_much_a_named_subject_weighs_is_told_by_the_unit() -> None:
    """"How much did X weigh?": the verb names what is measured, and the answer tells it by its unit ("171 pounds")
    without saying "weigh", as "How old is X?" is answered by "48": the missing verb does not sink it below the gate."""
    part = "How much did Senator Ann Reyes weigh at her physical in March 2020, a routine exam?"
    text = ("Senator Ann Reyes visited the Bethesda clinic on Saturday for what her office called a quick check of her "
            "knee. Her aides said the visit was unrelated to her annual exam. At her March physical she clocked in at "
            "171 pounds, according to a letter her doctor wrote to the clerk of the Senate. "
            "The senator is 61 and plays tennis twice a week.")
    pages = [PageText(source_id="S1", text=text, title="Senator Ann Reyes visits clinic", published="2020-03-20")]
    picks = select_sentences(part, pages)
    assert picks and "171 pounds" in picks[0].text


def test_who_scored_is_answered_by_the_sentence_that_names_the_goal() -> None:
    answer = ("Mara Lind's second goal of the game 1:40 into overtime gave the Harbor City Gulls a 3-2 win over the "
              "Lakeport Otters on Saturday night.")
    pages = [page("S1", f"{answer}\nThe Otters had led 2-0 after the first period.", title="Lind's goal lifts Gulls"),
             page("S2", "The Lakeport Otters host the Bay Hawks on Tuesday after a long road trip.\n"
                        "Tickets are still on sale at the box office.", title="Otters host Hawks"),
             COUNCIL]
    picks = select_sentences("Who scored the Gulls' overtime winner in their 3-2 win over the Otters?", pages, k=1)
    assert [p.text for p in picks] == [answer]


def test_who_was_the_title_is_answered_only_by_a_sentence_that_says_the_title() -> None:
    ombudsman = ("Public Ombudsman Rosa Vidal's office called on the interim government of Norland to withdraw the "
                 "troops from the Velka plant after the clashes.")
    president = "Interim President Tomas Berg of Norland defended the troops sent to the Velka plant in the clashes."
    noise = COUNCIL
    question = "Who was Norland's interim president during the Velka plant clashes?"
    assert select_sentences(question, [page("S1", ombudsman, title="Clashes at Velka"), noise]) == []
    picks = select_sentences(question, [page("S1", ombudsman, title="Clashes at Velka"),
                                        page("S2", president, title="Berg defends troops"), noise], k=1)
    assert [p.text for p in picks] == [president]


def test_who_was_the_ceo_is_answered_by_a_sentence_that_says_chief_executive() -> None:
    answer = "Dana Reyes, Acme's chief executive since 2017, announced the Norland plant closure on Monday."
    pages = [page("S1", f"{answer}\nThe plant employed 400 people.", title="Acme to close Norland plant"),
             COUNCIL]
    picks = select_sentences("Who was the CEO of Acme when it closed the Norland plant?", pages, k=1)
    assert [p.text for p in picks] == [answer]


BRIGHTWATER = page("S1", (
    "Brightwater Airlines on Tuesday named Priya Castellano as its next chief executive.\n"
    "Castellano has run the airline's operations since 2019.\n"
    "The airline flies to 60 cities."), title="Brightwater picks its next chief", published="2023-05-02")


def test_a_sentence_may_tell_the_asked_verb_in_a_word_of_its_family() -> None:
    # "named" is of "appointed"'s family (terms.FAMILIES): the sentence is a candidate though it never says "appoint".
    picks = select_sentences("Who was appointed by Brightwater Airlines in 2023?", [BRIGHTWATER])
    assert picks and "Priya Castellano" in picks[0].text


def test_a_year_a_sentence_counts_from_is_not_its_year() -> None:
    pages = [page("S1", "Brightwater Airlines on Tuesday named Priya Castellano, its chief operating officer "
                        "since 2019, as its next chief executive.\nThe airline flies to 60 cities.",
                  "Brightwater picks a chief", published="2023-05-02")]
    picks = select_sentences("Who was appointed by Brightwater Airlines in 2023?", pages)
    assert picks and "Priya Castellano" in picks[0].text
    assert select_sentences("Who was appointed by Brightwater Airlines in 2021?", pages) == []  # 2023 is around it


def test_a_verb_asked_widens_to_words_of_its_root_but_not_to_a_short_prefix() -> None:
    keyboards = [page("S1", "Wistron will be the main supplier for the 2020 Harbor laptop, analysts said.\n"
                            "The laptop ships in May.", "Harbor laptop parts")]
    picks = select_sentences("Which firm will supply keyboards for the 2020 Harbor laptop?", keyboards)
    assert picks and picks[0].text.startswith("Wistron")  # "supplier" shares the root of "supply"
    winter = [page("S1", "In the winter of 2022, Harbor Cup organiser Jane Doe moved the event to Oslo.\n"
                         "Tickets sold out.", "Harbor Cup moves")]
    assert select_sentences("Who won the 2022 Harbor Cup?", winter) == []  # "winter" is no word of "win"


def test_a_win_in_an_earlier_round_wins_no_title() -> None:
    pages = [page("S1", "OSLO - Norway reached the Harbor Cup final on Saturday, beating Chile 2-1 in the semifinal.\n"
                        "The final is on Sunday.", "Norway into the 2021 Harbor Cup final")]
    assert select_sentences("Who won the 2021 Harbor Cup?", pages) == []
    picks = select_sentences("Who won the 2021 Harbor Cup semifinal?", pages)  # the round asked
    assert picks and "beating Chile" in picks[0].text
    # A sentence that says the verb asked itself keeps its answer: a semifinal win beside it is a detail.
    won = [page("S1", "Norway won the 2021 Harbor Cup, beating Chile 2-1 in the final after a 3-0 semifinal win.\n"
                      "Fans filled the square.", "Norway wins the 2021 Harbor Cup")]
    picks = select_sentences("Who won the 2021 Harbor Cup?", won)
    assert picks and picks[0].text.startswith("Norway won")


def test_only_the_asked_verbs_widen_to_their_family() -> None:
    # "cost" is no verb the part asks with, so "pricing" does not stand for it: a European price is no answer to a US
    # one. (Widening every topic word too lowered held-out questions when measured.)
    pages = [page("S1", "Regular European pricing for the Audi e-tron Sportback will start at 71,350 euro.\n"
                        "Deliveries begin in spring.", title="Audi e-tron Sportback revealed")]
    assert select_sentences("How much will the Audi e-tron Sportback cost in the United States?", pages) == []
