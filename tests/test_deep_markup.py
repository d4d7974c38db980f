"""Markup past libxml2's nesting limit keeps its text (flatten.py), and an element's attribute flood is trimmed."""
from __future__ import annotations

import pytest

from pipeline.web import extract
from pipeline.web.extract import extract_html
from pipeline.web.flatten import MAX_DEPTH, flatten

SENTENCE = "Deep text that a reader can see on this page, written as a sentence."
SECOND = "A second paragraph &amp; more of the page's own text."


def nested(open_tag: str, close_tag: str, depth: int, inner: str) -> str:
    return f"<html><head><title>Deep</title></head><body>{open_tag * depth}{inner}{close_tag * depth}</body></html>"


@pytest.mark.parametrize("depth", [300, 20_000, 200_000])
def test_text_inside_deeply_nested_divs_is_read(depth: int) -> None:
    got = extract_html(nested("<div>", "</div>", depth, f"<p>{SENTENCE}</p><p>{SECOND}</p>"))
    assert got.text == f"{SENTENCE}\nA second paragraph & more of the page's own text."


def test_deeply_nested_inline_formatting_and_tables_are_read() -> None:
    assert extract_html(nested("<b>", "</b>", 20_000, f"<p>{SENTENCE}</p>")).text == SENTENCE
    cell = "<tr><td>Cell text deep inside nested tables of the page.</td></tr>"
    tables = nested("<table><tr><td>", "</td></tr></table>", 3_000, f"<table>{cell}</table>")
    # trafilatura renders each nested table as a row of cells: the text is read whole, between cell separators.
    words = extract_html(tables).text.replace("|", " ").split()
    assert " ".join(words) == "Cell text deep inside nested tables of the page."


def test_flatten_unwraps_only_past_its_depth_and_keeps_text_and_entities() -> None:
    shallow = "<div class='a'><p>One &amp; two &#169; <br/>three</p><!-- note --></div>"
    assert flatten(shallow) == "<div class='a'><p>One &amp; two &#169; <br/>three</p></div>"
    deep = flatten("<div>" * (MAX_DEPTH + 5) + "<p>x &lt; y</p>" + "</div>" * (MAX_DEPTH + 5))
    assert deep == "<div>" * MAX_DEPTH + "<br>x &lt; y" + "</div>" * MAX_DEPTH


def test_a_shallow_page_is_parsed_without_flattening(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(html: str) -> str:
        raise AssertionError("a page within the nesting limit must not be re-tokenised")

    monkeypatch.setattr(extract, "flatten", refuse)
    assert extract_html(nested("<div>", "</div>", 200, f"<p>{SENTENCE}</p>")).text == SENTENCE


def test_an_element_with_an_attribute_flood_keeps_the_attributes_that_are_read() -> None:
    flood = " ".join(f'data-x{i}="v"' for i in range(5_000))
    hidden = f'<div style="display:none" {flood}><p>Hidden words the page keeps from its readers here.</p></div>'
    html = f"<html><body><article><p>{SENTENCE}</p>{hidden}</article></body></html>"
    tree = extract._parse(html)
    crowded = [e for e in tree.iter() if e.get("style")]
    assert len(crowded) == 1 and dict(crowded[0].attrib) == {"style": "display:none"}
    assert extract_html(html).text == SENTENCE


def test_a_very_large_tree_skips_trafilaturas_comparison_with_readability(monkeypatch: pytest.MonkeyPatch) -> None:
    # That comparison's `.//p//text()` is one libxml2 call, quadratic and uninterruptible: on a huge page it let a
    # worker overrun its CPU budget. A spy on trafilatura's own function sees whether it ran.
    import trafilatura.core

    calls: list[int] = []
    real = trafilatura.core.compare_extraction

    def spy(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(trafilatura.core, "compare_extraction", spy)
    small = "<html><body>" + "".join(f"<p>Paragraph {i} of a short page about the harbour.</p>" for i in range(50))
    extract_html(small + "</body></html>")
    assert calls == [1]  # an ordinary page is read as trafilatura reads it, comparison and all
    large = "<html><body>" + "".join(f"<p>Paragraph {i} of a long page.</p>" for i in range(extract._FALLBACK_ELEMENTS))
    text = extract_html(large + "</body></html>").text
    assert calls == [1] and f"Paragraph {extract._FALLBACK_ELEMENTS - 1} of a long page." in text
