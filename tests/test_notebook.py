"""The notebook: one source per page however its URL is spelled, and no finding without a verified quote."""
from __future__ import annotations

import threading

import pytest

from pipeline.core.notebook import Notebook
from pipeline.core.schema import FetchResult, Finding, RejectedFinding

TEXT = (
    "The Sorbonne library was founded in 1257 by Robert de Sorbon.\n\n"
    "It holds roughly 2.5 million volumes today, according to the university.\n\n"
    "Critics say the reading rooms are not large enough for the student body."
)


def page(url: str = "https://example.org/library", text: str = TEXT, final_url: str | None = None) -> FetchResult:
    return FetchResult(ok=True, url=url, final_url=final_url or url, status=200, content_type="text/html",
                       title="Library", text=text, bytes=len(text))


@pytest.mark.parametrize("variant", [
    "https://example.org/library",
    "HTTPS://EXAMPLE.org/library",
    "https://example.org:443/library",
    "https://example.org/library/",
    "https://example.org/library#history",
    "https://example.org/library?utm_source=newsletter&utm_medium=email",
])
def test_url_variants_collapse_to_one_source(variant: str) -> None:
    nb = Notebook()
    first = nb.add_source(page())
    again = nb.add_source(page(url=variant))
    assert again.id == first.id == "S1"
    assert len(nb.sources()) == 1
    assert nb.resolve_source(variant) == first


def test_different_query_is_a_different_source() -> None:
    nb = Notebook()
    nb.add_source(page("https://example.org/a?id=1"))
    nb.add_source(page("https://example.org/a?id=2"))
    assert [s.id for s in nb.sources()] == ["S1", "S2"]


def test_redirected_page_is_known_by_both_urls() -> None:
    nb = Notebook()
    s = nb.add_source(page("http://short.example/x", final_url="https://example.org/library"))
    assert nb.add_source(page("https://example.org/library")).id == s.id
    assert nb.resolve_source("http://short.example/x") == s


def test_source_records_hash_and_length_of_the_exact_text() -> None:
    import hashlib

    s = Notebook().add_source(page())
    assert s.chars == len(TEXT)
    assert s.sha256 == hashlib.sha256(TEXT.encode()).hexdigest()


def test_failed_fetch_cannot_become_a_source() -> None:
    with pytest.raises(ValueError):
        Notebook().add_source(FetchResult(ok=False, url="https://x.org", error_kind="timeout", error="t"))


def test_verified_finding_stores_exact_offsets() -> None:
    nb = Notebook()
    s = nb.add_source(page())
    f = nb.add_finding(source=s.id, claim="It has about 2.5m books.",
                       quote="holds roughly 2.5 million volumes", sub_question="Q1", confidence="high")
    assert isinstance(f, Finding)
    assert f.id == "F1" and f.source == "S1"
    assert TEXT[f.start:f.end] == "holds roughly 2.5 million volumes" == f.quote


def test_mangled_quote_is_stored_as_the_page_wrote_it() -> None:
    nb = Notebook()
    s = nb.add_source(page())
    f = nb.add_finding(source=s.id, claim="Founded in 1257.", quote="FOUNDED  IN 1257 by Robert\nde Sorbon")
    assert isinstance(f, Finding)
    assert f.quote == "founded in 1257 by Robert de Sorbon" == TEXT[f.start:f.end]


def test_source_may_be_named_by_url() -> None:
    nb = Notebook()
    nb.add_source(page())
    f = nb.add_finding(source="https://example.org/library/?utm_campaign=x", claim="c",
                       quote="founded in 1257 by Robert de Sorbon")
    assert isinstance(f, Finding) and f.source == "S1"


def test_quote_from_a_page_never_fetched_is_rejected() -> None:
    nb = Notebook()
    nb.add_source(page())
    r = nb.add_finding(source="https://elsewhere.example/page", claim="c",
                       quote="founded in 1257 by Robert de Sorbon")
    assert isinstance(r, RejectedFinding) and "not fetched" in r.reason
    assert nb.findings() == [] and nb.rejected() == [r]


def test_quote_from_a_search_snippet_only_is_rejected() -> None:
    # The snippet came from search results for a page that was never fetched; it is not evidence.
    snippet = "The library now counts more than three million books in its collection"
    nb = Notebook()
    nb.add_source(page())
    for ref in ("S2", "https://news.example/library-snippet"):
        r = nb.add_finding(source=ref, claim="3m books", quote=snippet)
        assert isinstance(r, RejectedFinding)
    # Even citing a fetched source, a snippet that is not in its text is refused.
    r = nb.add_finding(source="S1", claim="3m books", quote=snippet)
    assert isinstance(r, RejectedFinding) and r.reason
    assert nb.findings() == []


@pytest.mark.parametrize("forged", [
    "holds roughly 3.5 million volumes",          # changed number
    "the reading rooms are large enough for the student body",  # dropped "not"
    "holds nearly 2.5 million volumes",           # changed word
])
def test_forged_quotes_are_rejected_with_a_reason(forged: str) -> None:
    nb = Notebook()
    nb.add_source(page())
    r = nb.add_finding(source="S1", claim="c", quote=forged)
    assert isinstance(r, RejectedFinding) and r.reason
    assert nb.rejected()[0].quote == forged


def test_empty_claim_is_rejected() -> None:
    nb = Notebook()
    nb.add_source(page())
    assert isinstance(nb.add_finding(source="S1", claim="  ", quote="founded in 1257 by Robert"), RejectedFinding)


def test_duplicate_finding_returns_the_existing_id() -> None:
    nb = Notebook()
    nb.add_source(page())
    a = nb.add_finding(source="S1", claim="c", quote="founded in 1257 by Robert de Sorbon")
    b = nb.add_finding(source="S1", claim="c again", quote="Founded in 1257 by Robert de Sorbon")
    assert isinstance(a, Finding) and isinstance(b, Finding) and a.id == b.id
    assert len(nb.findings()) == 1


def test_eight_threads_adding_at_once_lose_nothing_and_duplicate_nothing() -> None:
    nb = Notebook()
    sentences = [f"Sentence number {i} states that the value is {i * 7} units exactly." for i in range(40)]
    text = "\n".join(sentences)
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            barrier.wait()
            # Every thread adds the same page under a different spelling, then all 40 findings.
            src = nb.add_source(page(url=f"https://EXAMPLE.org/stats/?utm_source={k}", text=text))
            for i, sentence in enumerate(sentences):
                res = nb.add_finding(source=src.id, claim=f"value {i}", quote=sentence)
                assert isinstance(res, Finding)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(nb.sources()) == 1
    findings = nb.findings()
    assert len(findings) == 40
    assert sorted(f.id for f in findings) == sorted(f"F{i}" for i in range(1, 41))
    assert {f.quote for f in findings} == set(sentences)


def test_state_round_trip_keeps_sources_findings_and_rejections() -> None:
    nb = Notebook()
    nb.add_source(page())
    nb.add_finding(source="S1", claim="c", quote="founded in 1257 by Robert de Sorbon")
    nb.add_finding(source="S1", claim="c", quote="founded in 1357 by Robert de Sorbon")
    restored = Notebook.from_state(nb.state())
    assert restored.findings() == nb.findings() and restored.rejected() == nb.rejected()
    assert restored.text("S1") == TEXT
    nxt = restored.add_finding(source="S1", claim="d", quote="reading rooms are not large enough")
    assert isinstance(nxt, Finding) and nxt.id == "F2"
    assert restored.add_source(page("https://example.org/other")).id == "S2"


def test_support_verdict_is_recorded() -> None:
    nb = Notebook()
    nb.add_source(page())
    f = nb.add_finding(source="S1", claim="c", quote="founded in 1257 by Robert de Sorbon")
    assert isinstance(f, Finding)
    assert nb.set_support(f.id, "supported").support == "supported"
    assert nb.findings()[0].support == "supported"
