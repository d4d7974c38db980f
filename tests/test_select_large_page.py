"""SentenceIndex.build on a page past FULL_SCAN_CHARS: repeats are still skipped, in time linear in the page."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from pipeline.research.extractive.select import FULL_SCAN_CHARS, PageText, SentenceIndex

REPEATED = "The harbour bridge will open to traffic in the spring of next year."


def page(n: int) -> str:
    return "\n".join(f"Paragraph number {i} describes one more part of the long harbour project." for i in range(n))


def test_a_sentence_repeated_on_a_large_page_is_indexed_once_where_it_is_first_said() -> None:
    text = f"{REPEATED}\n{page(3_000)}\n{REPEATED}"
    assert len(text) > FULL_SCAN_CHARS
    index = SentenceIndex.build([PageText(source_id="S1", title="", text=text)])
    starts = [s.span.start for s in index.sentences if s.span.text == REPEATED]
    assert starts == [0]


def test_a_small_page_still_skips_a_sentence_said_inside_an_earlier_one() -> None:
    text = f"Officials said that {REPEATED[0].lower()}{REPEATED[1:]}\n{REPEATED}"
    index = SentenceIndex.build([PageText(source_id="S1", title="", text=text)])
    assert [s.span.start for s in index.sentences] == [0]  # the second is a quote of words said in the first


def test_indexing_a_page_at_the_text_cap_takes_seconds_not_minutes() -> None:
    # 2.1 MB, 28,000 sentences, in a subprocess with a generous bound: a scan from the top of the page for each
    # sentence took 29 s here, and grows with the square of the page; the set of sentences said takes 3 s.
    code = textwrap.dedent("""
        from pipeline.research.extractive.select import PageText, SentenceIndex
        from tests.test_select_large_page import page
        SentenceIndex.build([PageText(source_id="S1", title="", text=page(28_000))])
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=20)
