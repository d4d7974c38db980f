"""The writer through the real SDK against the loopback fake model; Sources section and no-evidence report in code.

The helpers above the tests (WriterBrain, make_world) are shared with test_review.py.
"""
from __future__ import annotations

import html
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pipeline.config import Settings
from pipeline.core.budget import Budget, Phase
from pipeline.core.events import ListSink
from pipeline.core.notebook import Notebook
from pipeline.core.schema import BudgetLimits, Calculation, Conflict, Finding, Problem, Source
from pipeline.models.anthropic import LLM, LLMError
from pipeline.research.context import RunContext
from pipeline.research.prompts import load
from pipeline.research.steps.checks import Evidence, check_report
from pipeline.research.steps.review import write_and_review
from pipeline.research.steps.write import (
    LABEL,
    label,
    no_evidence_report,
    sources_section,
    write_report,
    writer_message,
)
from pipeline.web.corpus import Corpus, CorpusPage, CorpusSearch, build_corpus
from pipeline.web.fetch import Fetcher
from pipeline.web.search.service import SearchService
from tests.fakes.anthropic_api import FakeAnthropic, FakeReply, MessagesRequest, default_brain, reply_json, reply_text

KEY = "sk-ant-test-" + "Wr1" * 8
QUESTION = "How is the city's transport budget spent?"
EVIL_TITLE = "Fares ![x](http://evil.example/) <script>alert(1)</script> `code` [click](http://evil.example/)"
COUNCIL = b"""<html><head><title>City budget 2024</title>
<meta property="article:published_time" content="2024-03-01"></head><body><article>
<p>The city council approved a budget of 12 million euros for 2024, after a long debate on Tuesday evening.</p>
<p>Bus ridership rose by 8 percent over the year &lt;img src=x onerror=alert(1)&gt; [see](http://evil.example/).</p>
</article></body></html>"""
TRANSIT = (b"""<html><head><title>""" + html.escape(EVIL_TITLE).encode() + b"""</title>
<meta property="article:published_time" content="2024-05-10"></head><body><article>
<p>Monthly passes cost 49 euros from June, the transit authority said on Friday in a statement to the press.</p>
<p>Ridership fell 3 percent in the first quarter, according to figures published by the authority this week.</p>
</article></body></html>""")
PAGES = [CorpusPage("https://council.example/budget", COUNCIL), CorpusPage("https://transit.example/fares", TRANSIT)]
# (source URL, sub-question, claim, quote, confidence, support)
FINDINGS = [
    ("https://council.example/budget", "Q1", "The city council approved a budget of 12 million euros for 2024",
     "The city council approved a budget of 12 million euros for 2024", "high", "supported"),
    ("https://transit.example/fares", "Q1", "Monthly passes cost 49 euros from June",
     "Monthly passes cost 49 euros from June", "high", "supported"),
    ("https://council.example/budget", "Q2", "Bus ridership rose by 8 percent over the year",
     "Bus ridership rose by 8 percent over the year <img src=x onerror=alert(1)> [see](http://evil.example/)",
     "low", "unknown"),
]
GAPS = ["How many residents cycle to work?"]

_WORD = re.compile(r"[a-z]{4,}")
_NUM = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")
_STOP = frozenset(["that", "this", "with", "from", "over", "after", "were", "have", "their", "about", "which"])


def _tag(text: str, name: str) -> str:
    m = re.search(rf"<{name}(?:\s[^>]*)?>(.*?)</{name}>", text, re.S)
    return html.unescape(m.group(1)) if m else ""


@dataclass
class WriterBrain:
    """A fake lead/worker model that reads the request: writes "claim [F#]." reports, fixes listed problems, judges.

    faults (first draft only, unless "stubborn"): unknown_id (first sentence cites F9), uncited (first sentence has
    no ids), invented_number (first sentence adds "approximately 65/month"), unsupported (an extra sentence the
    quotes do not support), no_label, no_title, sources_section (writes its own Sources), fenced (```markdown);
    regress: each revision fixes what it was told but adds two uncited lines.
    """

    faults: set[str] = field(default_factory=set)
    omit: set[str] = field(default_factory=set)  # finding ids the writer leaves out
    reverse: bool = False  # cite the findings in reverse order

    def __call__(self, req: MessagesRequest) -> FakeReply:
        text = req.last_user_text
        if "<sentence>" in text:
            return self.judge(text)
        if "<findings>" in text:
            if "<draft>" in text and "stubborn" not in self.faults:
                return reply_text(self.revise(text))
            return reply_text(self.first_draft(text))
        return default_brain(req)

    @staticmethod
    def findings(text: str) -> list[tuple[str, str, str]]:
        """(id, claim, confidence) of each <finding> in the request."""
        return [(fid, html.unescape(claim).rstrip("."), conf) for fid, conf, claim in re.findall(
            r'<finding id="(F\d+)"[^>]*confidence="(\w+)"[^>]*>\s*<claim>(.*?)</claim>', text, re.S)]

    @staticmethod
    def sentence(fid: str, claim: str, confidence: str) -> str:
        caveat = " (one source, low confidence)" if confidence == "low" else ""
        return f"{claim}{caveat} [{fid}]."

    def gap_lines(self, text: str) -> list[str]:
        return [f"No fetched source established this: {html.unescape(g).rstrip('?')} [{gid}]."
                for gid, g in re.findall(r'<gap id="(G\d+)">(.*?)</gap>', text, re.S)]

    def first_draft(self, text: str) -> str:
        found = [f for f in self.findings(text) if f[0] not in self.omit]
        found = found[::-1] if self.reverse else found
        body = [self.sentence(*f) for f in found]
        if body:
            fid, claim, _ = found[0]
            if "unknown_id" in self.faults:
                body[0] = f"{claim} [F9]."
            if "uncited" in self.faults:
                body[0] = f"{claim}."
            if "invented_number" in self.faults:
                body[0] = f"{claim}, approximately 65/month [{fid}]."
            if "unsupported" in self.faults:
                body.append(f"The council also promised free buses for every resident [{fid}].")
        head = [] if "no_title" in self.faults else [f"# {_tag(text, 'question')}", ""]
        if "no_label" not in self.faults:
            head += ["_Machine-assisted report, written from verified quotes._", ""]
        lines = head + body + [""] + self.gap_lines(text)
        if "sources_section" in self.faults:
            lines += ["", "## Sources", "- [F1] Made up, http://evil.example/, 2020: \"not a quote\""]
        report = "\n".join(lines)
        return f"```markdown\n{report}\n```" if "fenced" in self.faults else report

    def revise(self, text: str) -> str:
        """The draft with each sentence a problem names rewritten from the finding it mentions, or dropped."""
        bad = {html.unescape(s) for s in re.findall(r'<problem kind="[^"]*" sentence="([^"]*)"', text)}
        found = self.findings(text)
        out = []
        for line in _tag(text, "draft").splitlines():
            if line.strip() not in bad:
                out.append(line)
                continue
            match = next((f for f in found if f[1] in line), None)
            if match:
                out.append(self.sentence(*match))
        if 'kind="gap_not_mentioned"' in text:
            out += [""] + self.gap_lines(text)
        if "regress" in self.faults:
            out += ["", "Officials were pleased.", "Residents were not."]
        return "\n".join(out)

    @staticmethod
    def judge(text: str) -> FakeReply:
        """Supported when the sentence's figures and content words are all in the quotes (ids and caveats ignored)."""
        claim = re.sub(r"\[[^\]]*\]|\([^)]*\)", " ", _tag(text, "sentence")).lower()
        quotes = " ".join(html.unescape(q) for q in re.findall(r'<quote id="[FC]\d+">(.*?)</quote>', text, re.S))
        quotes = quotes.lower()
        words = {w for w in _WORD.findall(claim) if w not in _STOP}
        missing = sorted(words - set(_WORD.findall(quotes)))
        figures_ok = set(_NUM.findall(claim)) <= set(_NUM.findall(quotes))
        ok = figures_ok and not missing
        return reply_json({"analysis": f"Not in the quotes: {', '.join(missing) or 'nothing'}.",
                           "verdict": "supported" if ok else "unsupported"})


@dataclass
class World:
    fake: FakeAnthropic
    brain: WriterBrain
    ctx: RunContext
    evidence: Evidence
    events: ListSink

    def writer_requests(self) -> list[MessagesRequest]:
        return [r for r in self.fake.message_requests if "<findings>" in r.last_user_text]

    def judge_requests(self) -> list[MessagesRequest]:
        return [r for r in self.fake.message_requests if "<sentence>" in r.last_user_text]


def make_world(fake: FakeAnthropic, brain: WriterBrain, corpus: Corpus) -> World:
    """A RunContext on the fake model and an offline corpus, with the FINDINGS verified into its notebook."""
    settings = Settings(anthropic_api_key=KEY, anthropic_base_url=fake.base_url, model_max_retries=1,
                        model_timeout=5.0)
    budget = Budget(BudgetLimits(), settings.price)
    events = ListSink()
    fetcher = Fetcher(settings, corpus=corpus, budget=budget, events=events)
    notebook = Notebook()
    for page in PAGES:
        notebook.add_source(fetcher.fetch(page.url, Phase.RESEARCH))
    for url, sub, claim, quote, confidence, support in FINDINGS:
        src = notebook.resolve_source(url)
        assert src is not None
        found = notebook.add_finding(source=src.id, claim=claim, quote=quote, sub_question=sub, confidence=confidence)
        assert isinstance(found, Finding), found
        notebook.set_support(found.id, support)
    ctx = RunContext(settings=settings, llm=LLM(settings, budget, events), budget=budget, notebook=notebook,
                     search=SearchService(CorpusSearch(corpus), budget, events), fetcher=fetcher, events=events)
    evidence = Evidence(findings=notebook.findings(), sources=notebook.sources(), gaps=list(GAPS))
    return World(fake, brain, ctx, evidence, events)


@pytest.fixture
def corpus(tmp_path: Path) -> Iterator[Corpus]:
    c = build_corpus(PAGES, tmp_path / "corpus")
    yield c
    c.close()


@pytest.fixture
def world(corpus: Corpus) -> Iterator[World]:
    brain = WriterBrain()
    with FakeAnthropic(brain) as fake:
        yield make_world(fake, brain, corpus)


def inert_outside_escapes(text: str) -> str:
    """`text` with backslash-escaped characters removed: what Markdown could still act on."""
    return re.sub(r"\\.", "", text)


# -- the writer's request ---------------------------------------------------------------------------
def test_writer_request_uses_the_fixed_format_static_system_and_lead_model(world: World) -> None:
    src = Source(id="S1", url="https://a.example/x", final_url="https://a.example/x", title='Say "hi" & <go>',
                 published=None, fetched_at="2026-01-01T00:00:00+00:00", sha256="0" * 64, chars=10)
    f1 = Finding(id="F1", sub_question="Q1", source="S1", claim="A < B & C", quote="A is < B", start=0, end=8,
                 confidence="low", support="partial")
    bad = f1.model_copy(update={"id": "F2", "support": "unsupported"})
    ev = Evidence(findings=[f1, bad], sources=[src], gaps=["Why <not>?"],
                  calculations=[Calculation(id="C1", expression='(2 - 1) / 1 * 100', result="100")])
    conflicts = [Conflict(description='F1 says "x"; F3 says <y>.', findings=["F1", "F3"])]
    write_report(QUESTION, ev, conflicts, world.ctx)
    write_report(QUESTION, ev, conflicts, world.ctx, draft="# T\n\nA & B [F1].",
                 problems=[Problem(kind="uncited", message="Cite it.", sentence='He said "no" <b>.')])
    first, second = world.writer_requests()
    expected = (
        f"<question>{QUESTION}</question>\n<findings>\n"
        '<finding id="F1" sub_question="Q1" source="S1" title="Say &quot;hi&quot; &amp; &lt;go&gt;" '
        'published="undated" confidence="low" support="partial">\n'
        "<claim>A &lt; B &amp; C</claim>\n<quote>A is &lt; B</quote>\n</finding>\n</findings>\n"
        '<calculations>\n<calculation id="C1" expression="(2 - 1) / 1 * 100" result="100"/>\n</calculations>\n'
        '<gaps>\n<gap id="G1">Why &lt;not&gt;?</gap>\n</gaps>\n'
        '<conflicts>\n<conflict findings="F1,F3">F1 says "x"; F3 says &lt;y&gt;.</conflict>\n</conflicts>'
    )
    assert first.messages == [{"role": "user", "content": expected}]  # the unsupported F2 is never shown
    assert second.last_user_text == expected + (
        "\n<draft># T\n\nA &amp; B [F1].</draft>\n<problems>\n"
        '<problem kind="uncited" sentence="He said &quot;no&quot; &lt;b&gt;.">Cite it.</problem>\n</problems>')
    for r in (first, second):
        assert r.model == world.ctx.lead_model and r.system_text == load("writer") and r.output_schema is None
    assert first.recorded.field_bytes("system") == second.recorded.field_bytes("system")
    assert writer_message(QUESTION, ev, conflicts) == expected


# -- the body the writer returns ----------------------------------------------------------------------
def test_label_is_inserted_right_after_the_title(world: World) -> None:
    world.brain.faults = {"no_label"}
    body = write_report(QUESTION, world.evidence, [], world.ctx)
    lines = body.splitlines()
    assert lines[0] == f"# {QUESTION}" and lines[2] == LABEL
    assert sum(line.startswith("_Machine-assisted") for line in lines) == 1


def test_a_body_without_title_gets_one_and_a_misplaced_label_is_not_doubled(world: World) -> None:
    world.brain.faults = {"no_title"}  # the label comes first, with no title before it
    body = write_report(QUESTION, world.evidence, [], world.ctx)
    lines = body.splitlines()
    assert lines[:3] == [f"# {QUESTION}", "", LABEL]
    assert sum("achine-assisted" in line for line in lines) == 1
    assert check_report(body, world.evidence) == []


def test_a_sources_section_written_by_the_model_is_dropped_and_fences_removed(world: World) -> None:
    world.brain.faults = {"sources_section", "fenced"}
    body = write_report(QUESTION, world.evidence, [], world.ctx)
    assert "## Sources" not in body and "evil" not in body and "```" not in body
    assert body.startswith(f"# {QUESTION}\n")
    outcome = write_and_review(QUESTION, world.evidence, [], world.ctx, rounds=0)
    assert outcome.markdown.count("## Sources") == 1 and "Made up" not in outcome.markdown
    assert "- [F1] City budget 2024, https://council.example/budget, 2024-03-01:" in outcome.markdown


def test_an_empty_reply_is_an_llm_error(world: World) -> None:
    world.fake.rule(lambda r: "<findings>" in r.last_user_text, reply_text("   "))
    with pytest.raises(LLMError) as err:
        write_report(QUESTION, world.evidence, [], world.ctx)
    assert err.value.kind == "malformed"


# -- the Sources section --------------------------------------------------------------------------------
def test_sources_lists_only_cited_findings_in_order_of_first_citation(world: World) -> None:
    body = f"# T\n\n{LABEL}\n\nPasses cost 49 euros [F2]. The budget is 12 million euros [F1, F2]. Again [F2].\n"
    section = sources_section(body, world.evidence)
    bullets = [line for line in section.splitlines() if line.startswith("- ")]
    assert section.startswith("## Sources\n")
    assert [b.split("]")[0] for b in bullets] == ["- [F2", "- [F1"]  # F3 is not cited, so not listed
    assert bullets[1] == ('- [F1] City budget 2024, https://council.example/budget, 2024-03-01: '
                          '"The city council approved a budget of 12 million euros for 2024"')


def test_untrusted_title_and_quote_cannot_inject_links_images_or_html(world: World) -> None:
    body = "# T\n\nPasses [F2]. Ridership [F3]. Unknown [F7].\n"
    section = sources_section(body, world.evidence)
    assert "[F7]" not in section
    f2, f3 = [line for line in section.splitlines() if line.startswith("- ")]
    evil = r"hxxp://evil\[.\]example/"  # an unfetched URL in page text is defanged, so no viewer autolinks it
    assert f2.startswith(rf"- [F2] Fares \!\[x\]\({evil}\) \<script\>alert\(1\)\</script\> \`code\` "
                         rf"\[click\]\({evil}\), https://transit.example/fares, 2024-05-10:")
    assert rf'\<img src=x onerror=alert\(1\)\> \[see\]\({evil}\)' in f3
    for line in (f2, f3):
        live = inert_outside_escapes(line.split("] ", 1)[1])  # after the "[F#]" label
        assert not re.search(r"[\[\]()<>`!]", live), live


def test_urls_cannot_close_or_open_markdown_links() -> None:
    src = Source(id="S1", url="https://a.example/x", final_url="https://a.example/p[x](javascript:alert(1))<b> c",
                 title=None, published=None, fetched_at="t", sha256="0" * 64, chars=1)
    ev = Evidence(findings=[Finding(id="F1", source="S1", claim="c", quote="q\nline two", start=0, end=1)],
                  sources=[src])
    section = sources_section("# T\n\nC [F1].", ev)
    assert section.splitlines()[2] == ('- [F1] Untitled, https://a.example/p%5Bx%5D(javascript:alert(1))%3Cb%3E%20c, '
                                       'undated: "q line two"')


# -- no evidence at all ------------------------------------------------------------------------------------
def test_no_evidence_report_names_each_gap_and_states_no_figure() -> None:
    ev = Evidence(findings=[], sources=[], gaps=["What was the company's Q3 revenue?", "Who reported it?"])
    report = no_evidence_report("What was our Q3 revenue?", ev)
    lines = report.splitlines()
    assert lines[0] == "# What was our Q3 revenue?" and lines[2] == LABEL
    assert "No source that was fetched answered: What was the company's Q3 revenue? [G1]." in lines
    assert "No source that was fetched answered: Who reported it? [G2]." in lines
    assert not _NUM.findall(report)  # "Q3" is a label, not a figure
    assert check_report(report, ev) == []


def test_write_and_review_without_findings_makes_no_model_call(world: World) -> None:
    unsupported = [f.model_copy(update={"support": "unsupported"}) for f in world.evidence.findings]
    ev = Evidence(findings=unsupported, sources=world.evidence.sources, gaps=["What was our Q3 revenue?"])
    outcome = write_and_review("What was our Q3 revenue?", ev, [], world.ctx, rounds=2)
    assert world.fake.count() == 0
    assert outcome.problems == [] and outcome.rounds_used == 0
    assert "[G1]" in outcome.markdown and "12 million" not in outcome.markdown
    assert "## Sources" in outcome.markdown and "- [F" not in outcome.markdown


def test_label_names_the_proxies_of_the_plan() -> None:
    from pipeline.research.steps.checks import Evidence
    from pipeline.research.steps.write import label, no_evidence_report

    ev = Evidence(findings=[], sources=[], gaps=["q"], proxies=["most popular measured by [most GitHub stars](x)"])
    line = label(ev)
    assert line.startswith("_Machine-assisted") and line.endswith("._")
    assert "most popular measured by \\[most GitHub stars\\]\\(x\\)" in line  # inert: no link can form
    assert line in no_evidence_report("Which is most popular?", ev)
    assert label(Evidence(findings=[], sources=[])) == label()


def test_a_proxy_two_sub_questions_share_is_named_once_in_the_label() -> None:
    evidence = Evidence(findings=[], sources=[], proxies=["most GitHub stars", "most  github stars",
                                                          "downloads per month", "most GitHub stars"])
    text = label(evidence)
    assert text.count("GitHub stars") + text.count("github stars") == 1
    assert "most GitHub stars; downloads per month" in text
