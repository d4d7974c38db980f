"""What a model sees of a page: a focused excerpt within the limit, and find_in_page beyond it."""
from __future__ import annotations

from pipeline.research.tools.page_view import find_in_page, focus_excerpt, paragraphs

FILLER = [f"Paragraph {i} talks about gardening, soil and the weather in spring." for i in range(300)]
KEY = "The vector database Qdrant charges 25 dollars per month for the starter cluster."
TEXT = "\n\n".join(FILLER[:150] + [KEY] + FILLER[150:])


def test_short_pages_are_shown_whole() -> None:
    assert focus_excerpt("short page", "anything") == ("short page", False)


def test_excerpt_respects_limit_and_keeps_the_relevant_paragraph() -> None:
    out, cut = focus_excerpt(TEXT, "Qdrant starter price per month", limit=2_000)
    assert cut and len(out) <= 2_100
    assert KEY in out
    assert "[…]" in out


def test_gap_marker_only_where_paragraphs_were_left_out() -> None:
    text = "\n\n".join(["alpha one", "beta two", "gamma three", "delta four"]) + "\n\n" + "filler " * 2_000
    out, cut = focus_excerpt(text, "alpha beta delta", limit=35)
    assert cut and out == "alpha one\n\nbeta two\n\n[…]\ndelta four"


def test_excerpt_keeps_page_order() -> None:
    out, _ = focus_excerpt(TEXT, "Paragraph 3 Paragraph 200 Qdrant", limit=3_000)
    assert out.index("Paragraph 3 ") < out.index(KEY) < out.index("Paragraph 200 ")


def test_one_huge_paragraph_is_cut_to_the_limit() -> None:
    out, cut = focus_excerpt("word " * 5_000, "word", limit=1_000)
    assert cut and len(out) == 1_000


def test_find_in_page_returns_the_paragraph_around_the_needle_beyond_the_excerpt() -> None:
    got = find_in_page(TEXT, "Qdrant charges 25 DOLLARS per month", context=1)
    assert got is not None and KEY in got and "Paragraph 149" in got and "Paragraph 150" in got
    assert "Paragraph 148" not in got


def test_find_in_page_short_needle_and_miss() -> None:
    got = find_in_page(TEXT, "qdrant", context=0)
    assert got == KEY
    assert find_in_page(TEXT, "Milvus") is None
    assert find_in_page(TEXT, "   ") is None


def test_paragraph_offsets_cover_the_text() -> None:
    text = "a\n\nb\nc\n\n\n  \nd"
    assert [text[a:b] for a, b in paragraphs(text)] == ["a", "b", "c", "d"]
