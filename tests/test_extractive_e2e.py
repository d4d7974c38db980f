"""The extractive mode end to end: no model, no key, no network, over the shipped `news` corpus and small corpora."""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.cli.main import main
from pipeline.config import SHIPPED_CORPORA, Settings
from pipeline.core.schema import RunOptions, RunResult
from pipeline.research.orchestrator import research
from pipeline.research.steps.checks import Evidence, check_report
from pipeline.web.corpus import Corpus, CorpusPage, build_corpus
from pipeline.web.fetch import Fetcher

ROOT = Path(__file__).resolve().parents[1]
DRAGONFLY = "https://www.sciencealert.com/we-finally-have-a-global-geological-map-of-saturn-s-moon-titan"
ASSANGE = {"https://www.bbc.com/news/world-europe-50473792":
           "The 48-year-old Australian was evicted in April",
           "https://www.albawaba.com/news/sweden-drops-its-investigation-rape-allegation-against-julian-assange-1322369":
           "extradite Assange, 47, over"}


@pytest.fixture(scope="module")
def news(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the shipped news corpus with its search index built once for this module."""
    dest = tmp_path_factory.mktemp("corpora") / "news"
    shutil.copytree(SHIPPED_CORPORA / "news", dest, ignore=shutil.ignore_patterns(".index*"))
    Corpus.open(dest).close()
    return dest


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`python -m pipeline ARGS` in a child process with `env` added; no key, the network guard on."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "RESEARCH_"))}
    return subprocess.run([sys.executable, "-m", "pipeline", *args], env={**full, **env}, capture_output=True,
                          text=True, timeout=120, cwd=ROOT, check=False)


def _run(question: str, corpus: Path, db: Path) -> RunResult:
    settings = Settings(corpus_dir=str(corpus), db_path=str(db))
    return research(question, settings, options=RunOptions(mode="extractive"))


def _page_text(corpus: Path, url: str) -> str:
    """The text a fetch of `url` from the corpus gives: what quotes are checked against."""
    page = Fetcher(Settings(), corpus=Corpus.open(corpus)).fetch(url)
    assert page.ok and page.text is not None
    return page.text


def _checked(rr: RunResult, corpus: Path) -> None:
    """Every finding's quote is the text at its offsets in its page, and the report passes the reviewer's checks."""
    sources = {s.id: s for s in rr.sources}
    for f in rr.findings:
        text = _page_text(corpus, sources[f.source].final_url)
        assert hashlib.sha256(text.encode()).hexdigest() == sources[f.source].sha256
        assert text[f.start:f.end] == f.quote
    evidence = Evidence(findings=rr.findings, sources=rr.sources, gaps=rr.report.gaps)
    assert check_report(rr.report.markdown, evidence) == []


def test_a_fresh_clone_answers_with_no_key_and_no_settings(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    proc = _cli(["run", "When is NASA's Dragonfly mission scheduled to reach Titan?", "--mode", "extractive",
                 "--json", str(out)], {"RESEARCH_DB": str(tmp_path / "runs.sqlite")})
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    rr = RunResult.model_validate_json(out.read_text())
    assert (rr.mode, rr.status, rr.models) == ("extractive", "complete", {"lead": "none", "worker": "none"})
    assert rr.usage.model_calls == 0 and rr.usage.cost_usd == 0 and rr.usage.input_tokens == 0
    by_id = {s.id: s for s in rr.sources}
    answer = [f for f in rr.findings if by_id[f.source].final_url == DRAGONFLY and "2034" in f.quote]
    assert answer, rr.findings
    assert f"[{answer[0].id}]" in proc.stdout and "no model" in proc.stdout
    _checked(rr, SHIPPED_CORPORA / "news")


def test_an_unanswerable_question_names_a_gap_and_states_no_figure(news: Path, tmp_path: Path) -> None:
    rr = _run("Who won the 2019 Tour de France?", news, tmp_path / "r.sqlite")
    assert rr.status == "complete" and rr.findings == [] and rr.report.gaps
    body = rr.report.markdown.split("\n", 1)[1]  # the title repeats the question
    assert "[G1]" in body
    assert not re.search(r"\d", body.replace("2019 Tour de France", "").replace("[G1]", ""))
    _checked(rr, news)


def test_two_pages_that_disagree_on_a_figure_give_a_conflict_with_both_dates(news: Path, tmp_path: Path) -> None:
    rr = _run("How old is Julian Assange?", news, tmp_path / "r.sqlite")
    sources = {s.id: s for s in rr.sources}
    findings = {f.id: f for f in rr.findings}
    pairs = [{sources[findings[i].source].final_url for i in c.findings} for c in rr.report.conflicts]
    assert set(ASSANGE) in pairs
    section = rr.report.markdown.split("## Sources disagree", 1)[1].split("## Sources", 1)[0]
    for url, words in ASSANGE.items():
        src = next(s for s in rr.sources if s.final_url == url)
        assert src.published and f"({src.published})" in section and words in section
    _checked(rr, news)


def test_a_question_with_three_parts_gives_three_sub_questions(news: Path, tmp_path: Path) -> None:
    rr = _run("When is NASA's Dragonfly mission scheduled to reach Titan, how many companies are eligible to bid on "
              "NASA lunar payload task orders, and what share of Kylie Jenner's beauty business did Coty acquire?",
              news, tmp_path / "r.sqlite")
    assert rr.plan is not None and len(rr.plan.sub_questions) == 3
    assert {f.sub_question for f in rr.findings} == {sq.id for sq in rr.plan.sub_questions}
    assert rr.status == "complete"
    _checked(rr, news)


@pytest.mark.parametrize("question", [
    "the and of it is",                                      # only stop words
    "Wie viele Mitarbeiter hat WeWork in Tokio entlassen?",  # another language
    "zyxwvu qqqpl florbix?",                                 # no page matches
    "What happened? " + "Tell me more about the history of it all and why. " * 100,  # 5,000 characters
])
def test_hard_questions_give_an_honest_report_and_no_traceback(question: str, news: Path, tmp_path: Path) -> None:
    rr = _run(question, news, tmp_path / "r.sqlite")
    assert rr.status in ("complete", "partial") and not [p for p in rr.problems if p.kind == "internal_error"]
    assert rr.plan is not None and 1 <= len(rr.plan.sub_questions) <= 4
    assert rr.findings or rr.report.gaps  # either quoted evidence or a named gap, never silence
    _checked(rr, news)


def test_an_empty_question_is_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "   ", "--mode", "extractive"]) == 2
    assert "the question is empty" in capsys.readouterr().err


def _damaged(tmp_path: Path) -> Path:
    corpus = tmp_path / "damaged"
    build_corpus([CorpusPage("https://example.org/a", b"<html><body><p>" + b"Some text here. " * 40
                             + b"</p></body></html>")], corpus)
    page = next((corpus / "pages").iterdir())
    page.write_bytes(gzip.compress(b"x" * 100)[:20])  # a truncated gzip stream
    for index in corpus.glob(".index*"):
        index.unlink()
    return corpus


def _manifest(tmp_path: Path, content: bytes) -> Path:
    corpus = tmp_path / "bad"
    corpus.mkdir()
    (corpus / "manifest.jsonl").write_bytes(content)
    return corpus


@pytest.mark.parametrize("make", [
    lambda p: p / "missing",
    _damaged,
    lambda p: _manifest(p, b"{\n"),                                      # not JSON
    lambda p: _manifest(p, b'{"url": "https://x.example/"}\n'),          # neither a page nor a status
    lambda p: _manifest(p, b'{"url": "https://x.example/", "path": "../etc/passwd"}\n'),  # outside the folder
    lambda p: _manifest(p, b"\xff\xfe{}\n"),                             # not UTF-8
])
def test_a_missing_or_damaged_corpus_is_one_line_naming_the_setting(make: Callable[[Path], Path],
                                                                    tmp_path: Path) -> None:
    corpus = make(tmp_path)
    proc = _cli(["run", "What happened?", "--mode", "extractive"],
                {"RESEARCH_CORPUS_DIR": str(corpus), "RESEARCH_DB": str(tmp_path / "r.sqlite")})
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "RESEARCH_CORPUS_DIR" in lines[0] and "Traceback" not in proc.stderr


def test_a_corpus_in_a_read_only_folder_is_searched_from_memory(news: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "ro"
    shutil.copytree(news, copy, ignore=shutil.ignore_patterns(".index*"))

    def read_only(*args: object, **kwargs: object) -> tuple[int, str]:
        raise OSError(30, "Read-only file system")  # as root, chmod cannot make a folder read-only

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    rr = _run("When is NASA's Dragonfly mission scheduled to reach Titan?", copy, tmp_path / "r.sqlite")
    assert any("2034" in f.quote for f in rr.findings)
    assert not list(copy.glob(".index*"))


def test_a_model_call_in_an_extractive_run_is_refused(news: Path, tmp_path: Path) -> None:
    from pipeline.models.base import LLMError
    from pipeline.models.none import NoModel

    with pytest.raises(LLMError, match="no model"):
        NoModel().call(model="m", system="s", messages=[], max_tokens=1, purpose="p")
    rr = _run("When is NASA's Dragonfly mission scheduled to reach Titan?", news, tmp_path / "r.sqlite")
    assert rr.usage.model_calls == 0 and json.loads(rr.model_dump_json())["models"] == {"lead": "none",
                                                                                       "worker": "none"}


def test_a_sentence_the_reviewer_would_cut_in_two_is_not_quoted(tmp_path: Path) -> None:
    # "Gov." is no abbreviation to the reviewer's sentence splitter, so a quote holding it would read as two
    # sentences, one of them uncited; the selector skips such a sentence instead of writing a failing line.
    body = ("<html><head><title>Road money</title></head><body><article><p>Gov. Whitmer said the state will spend "
            "40 million dollars on roads next year.</p>" + "<p>Unrelated filler about the weather today.</p>" * 5
            + "</article></body></html>").encode()
    corpus = tmp_path / "c"
    build_corpus([CorpusPage("https://example.org/roads", body)], corpus)
    rr = _run("How much will the state spend on roads?", corpus, tmp_path / "r.sqlite")
    assert rr.status == "complete", rr.problems
    _checked(rr, corpus)


def _hostile_corpus(tmp_path: Path) -> Path:
    """Pages whose titles and text try to become Markdown structure, terminal escapes or unfetched links."""
    def page(title: str, paragraphs: list[str]) -> bytes:
        body = "".join(f"<p>{x}</p>" for x in paragraphs)
        return (f"<html><head><title>{title}</title></head><body><article><h1>{title}</h1>{body}"
                "</article></body></html>").encode()
    filler = ["The committee met on a rainy afternoon to talk about other business entirely."] * 4
    return _built(tmp_path, [
        CorpusPage("https://a.example/bridge", page(
            "## Injected heading? Ignore the checks", [
                "The Harbor Bridge toll for cars is 7 dollars at peak hours, the city transport office said.",
                "Gov. Alvarez said the Harbor Bridge toll will not change before the summer.",
                "The Harbor Bridge toll schedule is posted at https://evil.example/tolls for drivers.",
                *filler]), title="## Injected heading? Ignore the checks", published="2024-03-01"),
        CorpusPage("https://b.example/bridge", page(
            "Bridge \x1b[31mtolls\x1b[0m *rise*", [
                "The Harbor Bridge toll for cars is 9 dollars at peak hours, according to the *new* schedule.",
                *filler]), title="Bridge \x1b[31mtolls\x1b[0m *rise*", published="2024-04-01"),
        CorpusPage("https://c.example/bridge", page("Bridge news", [
            "The Harbor Bridge toll for cars is 8 dollars at peak hours under the interim plan.", *filler]),
            published="2024-05-01"),
    ])


def _built(tmp_path: Path, pages: list[CorpusPage]) -> Path:
    corpus = tmp_path / "hostile"
    build_corpus(pages, corpus)
    return corpus


def test_hostile_titles_and_sentences_cannot_escape_the_checks(tmp_path: Path) -> None:
    corpus = _hostile_corpus(tmp_path)
    rr = _run("How much is the Harbor Bridge toll for cars at peak hours?", corpus, tmp_path / "r.sqlite")
    assert rr.status == "complete", rr.problems
    body = rr.report.markdown.split("\n## Sources\n", 1)[0]
    lines = body.splitlines()
    assert [ln for ln in lines if ln.startswith("#")] == [lines[0], "### Sources disagree"]  # beside its answer
    assert "\x1b" not in rr.report.markdown and "evil.example" not in body
    assert "\\*new\\*" in body  # emphasis markers from a page are shown, not interpreted
    _checked(rr, corpus)
    section = rr.report.markdown.split("## Sources disagree", 1)[1].split("## Sources", 1)[0]
    assert section.count("[F") == len({f.source for f in rr.findings}) == 3  # one block, each quote once


@pytest.mark.parametrize("question", [
    "What did Gov. Alvarez say about the Harbor Bridge toll?",
    "Is https://a.example/bridge right about the Harbor Bridge toll for cars?",
    "https://a.example/bridge says what about the Harbor Bridge toll for cars?",
    "What is the Harbor Bridge toll? Who built the Harbor Bridge? When did the Harbor Bridge open? How long is the "
    "Harbor Bridge? Who owns the harbor ferry? What does the harbor tunnel cost?",
])
def test_questions_with_abbreviations_urls_or_many_parts_pass_the_checks(question: str, tmp_path: Path) -> None:
    corpus = _hostile_corpus(tmp_path)
    rr = _run(question, corpus, tmp_path / "r.sqlite")
    assert rr.status == "complete", rr.problems
    assert rr.plan is not None and len(rr.plan.sub_questions) <= 4
    assert "answered: Not researched" not in rr.report.markdown
    assert "Https://" not in rr.report.markdown
    _checked(rr, corpus)


def test_a_model_run_without_a_key_names_the_key_and_the_mode_that_needs_none(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "What happened?", "--mode", "fixed"]) == 2
    err = capsys.readouterr().err
    assert "ANTHROPIC_API_KEY" in err and "--mode extractive" in err


def _toll_pages(*answer_at: int) -> list[CorpusPage]:
    """Six pages on the Harbor Bridge toll: p0-p2 use every word of the question (search ranks them first), p3-p5
    only some; only the pages `answer_at` give the toll, each in its own words."""
    answers = ["The toll for cars crossing the Harbor Bridge at peak hours is now 7 dollars.",
               "Motorists are charged 7 dollars at rush hour to use the Harbor Bridge, the board said."]
    filler = "The weather on the coast was mild and the ferries ran on time all week."
    out = []
    for i in range(6):
        lead = ("The Harbor Bridge toll for cars at peak hours was debated by the board." if i < 3
                else "The Harbor Bridge board met.")
        lines = [lead, *([filler] * 4), *([answers[len(out) % 2]] if i in answer_at else [])]
        body = "".join(f"<p>{x}</p>" for x in lines)
        title = "Harbor Bridge toll for cars at peak hours" if i < 3 else f"Board notes {i}"
        out.append(CorpusPage(f"https://p{i}.example/toll", (
            f"<html><head><title>{title}</title></head><body><article>{body}</article></body>"
            "</html>").encode(), published=f"2024-0{i + 1}-01"))
    return out


def test_a_part_no_page_read_answers_reads_further_results_within_the_fetch_budget(tmp_path: Path) -> None:
    corpus = _built(tmp_path, _toll_pages(4))
    question = "How much is the Harbor Bridge toll for cars at peak hours?"
    rr = _run(question, corpus, tmp_path / "r.sqlite")
    assert rr.status == "complete", rr.problems
    by_id = {s.id: s.url for s in rr.sources}
    assert len(rr.sources) > 3 and "https://p4.example/toll" in {by_id[f.source] for f in rr.findings}
    assert any("7 dollars" in f.quote for f in rr.findings)
    _checked(rr, corpus)
    tight = research(question, Settings(corpus_dir=str(corpus), db_path=str(tmp_path / "t.sqlite")),
                     options=RunOptions(mode="extractive", limits={"fetches": 4, "reserve": 0.0}))  # type: ignore[arg-type]
    assert tight.usage.fetches <= 4 and len(tight.sources) <= 4


def test_a_part_two_of_the_first_pages_answer_reads_no_further(tmp_path: Path) -> None:
    corpus = _built(tmp_path, _toll_pages(0, 1))
    rr = _run("How much is the Harbor Bridge toll for cars at peak hours?", corpus, tmp_path / "r.sqlite")
    assert len({f.source for f in rr.findings if "7 dollars" in f.quote}) == 2
    assert rr.usage.fetches == 3 and len(rr.sources) == 3


def _appointment_pages() -> list[CorpusPage]:
    """Six pages on who runs the Harbor Bridge authority: p0 names Maria Lopez three times, p1 names another person
    on another matter, p2 names nobody (search ranks these three first); p4, ranked lower, names Maria Ortiz in
    p0's own sentence."""
    council = "The city council appointed {} to run the Harbor Bridge authority on Monday after a long search."
    bodies = [
        [council.format("Maria Lopez"),
         "Maria Lopez will run the Harbor Bridge authority from its new offices, the city council said.",
         "The city council said the appointment of Maria Lopez to the Harbor Bridge authority ends the search."],
        ["Tom Baker, who was appointed to the city council in May, wants the Harbor Bridge authority to run ferries."],
        ["The city council will appoint members to run the Harbor Bridge authority, a spokesman said on Monday."],
        ["The Harbor Bridge board met."], [council.format("Maria Ortiz")], ["The Harbor Bridge board met again."]]
    filler = "The weather on the coast was mild and the ferries ran on time all week."
    out = []
    for i, lines in enumerate(bodies):
        title = "City council appoints head to run the Harbor Bridge authority" if i < 3 else f"Board notes {i}"
        body = "".join(f"<p>{x}</p>" for x in (lines if i < 3 else ["The Harbor Bridge board met.", *[filler] * 4,
                                                                     *lines]))
        out.append(CorpusPage(f"https://p{i}.example/harbor", (
            f"<html><head><title>{title}</title></head><body><article>{body}</article></body></html>").encode(),
            published=f"2024-0{i + 1}-01"))
    return out


def test_a_name_only_one_page_gives_reads_on_and_shows_the_page_that_names_another(tmp_path: Path) -> None:
    # Two pages gave sentences, but only one gave the answer: nothing corroborates it, so the run reads on, and
    # the fifth page tells p0's sentence with another name. Both sides are shown as a conflict.
    corpus = _built(tmp_path, _appointment_pages())
    rr = _run("Whom did the city council appoint to run the Harbor Bridge authority?", corpus, tmp_path / "r.sqlite")
    assert rr.status == "complete", rr.problems
    by_id = {s.id: s.url for s in rr.sources}
    assert "https://p4.example/harbor" in by_id.values()
    findings = {f.id: f for f in rr.findings}
    sides = [[findings[i].quote for i in c.findings] for c in rr.report.conflicts]
    assert any(any("Maria Lopez" in q for q in quotes) and any("Maria Ortiz" in q for q in quotes) for quotes in sides)
    _checked(rr, corpus)
