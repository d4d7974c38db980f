"""The grader, against runs with known outcomes: every expectation and measure passes and fails when it should."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from pipeline.bench.grade import Expectation, RunGrade, contains_term, grade_run
from pipeline.bench.suite import SuiteError, SuiteQuestion, load_suite
from pipeline.bench.summary import grade_suite
from pipeline.core.schema import Calculation, Conflict, Finding, Plan, Report, RunResult, Source, SubQuestion, Usage

PAGE_A = ("Emirates finalized a deal to purchase 30 of Boeing's 787-9 Dreamliner jets on Wednesday. "
          "The order is worth $8.8 billion at list prices.")
PAGE_B = "The US wants the UK to extradite Assange, 47, over the 2010 leaks. Nothing else is said here at all."
PAGE_C = "The 48-year-old Australian was evicted in April and sentenced to 50 weeks in jail."
TEXTS = {"S1": PAGE_A, "S2": PAGE_B, "S3": PAGE_C}
URLS = {"S1": "https://news.example/emirates", "S2": "https://news.example/assange-b",
        "S3": "https://news.example/assange-c"}


def source(sid: str, *, text: str | None = None, published: str | None = "2019-11-20") -> Source:
    body = TEXTS[sid] if text is None else text
    return Source(id=sid, url=URLS[sid], final_url=URLS[sid], title=f"Page {sid}", published=published,
                  fetched_at="2019-11-21T00:00:00+00:00", sha256=hashlib.sha256(body.encode()).hexdigest(),
                  chars=len(body))


def finding(fid: str, sid: str, quote: str, *, shift: int = 0) -> Finding:
    start = TEXTS[sid].index(quote) + shift
    return Finding(id=fid, source=sid, claim=quote, quote=quote, start=start, end=start + len(quote))


F_ORDER = finding("F1", "S1", "Emirates finalized a deal to purchase 30 of Boeing's 787-9 Dreamliner jets")
F_AGE47 = finding("F2", "S2", "The US wants the UK to extradite Assange, 47, over the 2010 leaks.")
F_AGE48 = finding("F3", "S3", "The 48-year-old Australian was evicted in April")
F_WORTH = finding("F4", "S1", "The order is worth $8.8 billion at list prices.")


def run(markdown: str, *, findings: list[Finding] | None = None, sources: list[Source] | None = None,
        gaps: list[str] | None = None, conflicts: list[Conflict] | None = None, plan: Plan | None = None,
        calculations: list[Calculation] | None = None, status: str = "complete") -> RunResult:
    return RunResult.model_validate({
        "run_id": "r1", "question": "How many 787-9 jets did Emirates order?", "mode": "extractive", "status": status,
        "plan": plan or Plan(sub_questions=[SubQuestion(id="Q1", question="How many?")]),
        "sources": sources if sources is not None else [source("S1"), source("S2"), source("S3")],
        "findings": findings if findings is not None else [F_ORDER, F_AGE47, F_AGE48, F_WORTH],
        "calculations": calculations or [],
        "report": Report(markdown=markdown, gaps=gaps or [], conflicts=conflicts or []),
        "usage": Usage(input_tokens=10, output_tokens=5, cost_usd=0.25, model_calls=2), "timings": {"total": 1.5}})


def stored(src: Source) -> str | None:
    return TEXTS.get(src.id)


def q(**kw: object) -> SuiteQuestion:
    base: dict[str, object] = {"id": "q1", "question": "How many 787-9 jets did Emirates order?",
                               "kind": "single_page", "split": "dev"}
    return SuiteQuestion.model_validate(base | kw)


def verdict(grade: RunGrade, name: str) -> bool:
    return expectation(grade, name).passed


def expectation(grade: RunGrade, name: str) -> Expectation:
    (e,) = [e for e in grade.expectations if e.name == name]
    return e


ANSWERED = "# Q\n\nPage S1 (2019-11-20) reports: \"Emirates finalized a deal to purchase 30 of Boeing's 787-9 " \
           "Dreamliner jets\" [F1].\n\n## Sources\n- [F1] https://news.example/emirates 31 jets\n"


# --- answer recall and gold pages ---------------------------------------------------------------------------------

def test_answer_found_in_a_cited_finding_passes() -> None:
    g = grade_run(q(answer_terms=["30", ["Boeing", "Airbus"]], gold_pages=[URLS["S1"]]), run(ANSWERED), stored)
    assert verdict(g, "answer") and g.answer_recall == 1.0 and g.gold_page_recall == 1.0 and g.passed


def test_answer_only_in_an_uncited_finding_fails() -> None:
    g = grade_run(q(answer_terms=["$8.8 billion"]), run(ANSWERED), stored)  # F4 carries it, but is not cited
    assert not verdict(g, "answer") and g.answer_recall == 0.0 and not g.passed


def test_answer_recall_is_the_share_of_term_groups_quoted() -> None:
    g = grade_run(q(answer_terms=["30", "Airbus"]), run(ANSWERED), stored)
    assert g.answer_recall == 0.5 and not verdict(g, "answer")


def test_gold_page_recall_counts_gold_pages_among_sources_by_url_key() -> None:
    g = grade_run(q(gold_pages=["HTTPS://News.Example/emirates/?utm_source=x", "https://news.example/missing"]),
                  run(ANSWERED), stored)
    assert g.gold_page_recall == 0.5
    assert grade_run(q(), run(ANSWERED), stored).gold_page_recall is None


@pytest.mark.parametrize(("text", "term", "found"), [
    ("sold 30,154 new cars", "30154", True), ("sold 30154 cars", "30,154", True), ("nearly 300 districts", "300", True),
    ("nearly 300 districts", "30", False), ("in 2030", "30", False), ("up 1.30 points", "30", False),
    ("a POLICE  station", "police station", True), ("Bolivia\u2019s defender", "Bolivia's", True),
    ("worth $8 billion", "$8 billion", True), ("worth $80 billion", "$8 billion", False), ("51% stake", "51%", True),
])
def test_terms_compare_case_spaces_and_numbers_normalised(text: str, term: str, found: bool) -> None:
    assert contains_term(text, term) is found


# --- citation precision -------------------------------------------------------------------------------------------

def test_citations_verified_when_each_quote_is_at_its_offsets_of_the_matching_text() -> None:
    g = grade_run(q(), run(ANSWERED), stored)
    assert verdict(g, "citations_verified") and g.citation_precision == 1.0 and g.quotes_checked == 1


@pytest.mark.parametrize(("case", "why"), [("offsets", "not at"), ("hash", "sha256"), ("missing", "no stored text")])
def test_citation_precision_fails_on_moved_quote_changed_page_or_missing_text(case: str, why: str) -> None:
    findings = [finding("F1", "S1", F_ORDER.quote, shift=1) if case == "offsets" else F_ORDER]
    src = source("S1", text=PAGE_A + " edited" if case == "hash" else None)

    def text(s: Source) -> str | None:
        return None if case == "missing" else TEXTS[s.id]

    g = grade_run(q(), run(ANSWERED, findings=findings, sources=[src]), text)
    assert not verdict(g, "citations_verified") and g.citation_precision == 0.0 and not g.passed
    assert why in g.quote_failures[0]


# --- gap ------------------------------------------------------------------------------------------------------------

GAP_ONLY = "# Q\n\nNo source found answers this: who won the 2019 Tour de France? [G1]\n"


def test_gap_named_with_no_figure_passes() -> None:
    g = grade_run(q(kind="unanswerable", expect_gap=True, question="Who won the 2019 Tour de France?"),
                  run(GAP_ONLY, findings=[], gaps=["Who won the 2019 Tour de France?"]), stored)
    assert verdict(g, "gap_named") and g.passed


def test_gap_recorded_but_not_cited_fails() -> None:
    g = grade_run(q(kind="unanswerable", expect_gap=True),
                  run("# Q\n\nNothing was found.\n", findings=[], gaps=["How many?"]), stored)
    assert not verdict(g, "gap_named")


def test_gap_named_but_a_figure_stated_fails() -> None:
    md = GAP_ONLY + "\nPage S1 (2019-11-20) reports: \"Emirates finalized a deal to purchase 30 of Boeing's 787-9 " \
                    "Dreamliner jets\" [F1].\n"
    g = grade_run(q(kind="unanswerable", expect_gap=True, question="Who won the 2019 Tour de France?"),
                  run(md, gaps=["Who won the 2019 Tour de France?"]), stored)
    assert not verdict(g, "gap_named") and "30" in expectation(g, "gap_named").detail


# --- conflict -------------------------------------------------------------------------------------------------------

BOTH = "# Q\n\nS2 reports \"The US wants the UK to extradite Assange, 47, over the 2010 leaks.\" [F2]. S3 reports " \
       "\"The 48-year-old Australian was evicted in April\" [F3].\n"


def test_conflict_with_both_values_passes() -> None:
    g = grade_run(q(kind="conflict", expect_conflict=["48", "47"]),
                  run(BOTH, conflicts=[Conflict(description="age", findings=["F2", "F3"])]), stored)
    assert verdict(g, "conflict_shown")


@pytest.mark.parametrize("ids", [["F2"], ["F2", "F1"], []])
def test_conflict_missing_a_side_fails(ids: list[str]) -> None:
    conflicts = [Conflict(description="age", findings=ids)] if ids else []
    g = grade_run(q(kind="conflict", expect_conflict=["48", "47"]), run(BOTH, conflicts=conflicts), stored)
    assert not verdict(g, "conflict_shown")


def test_one_quote_cannot_be_both_sides_of_a_conflict() -> None:
    g = grade_run(q(kind="conflict", expect_conflict=["47", "2010"]),
                  run(BOTH, conflicts=[Conflict(description="x", findings=["F2", "F3"])]), stored)
    assert not verdict(g, "conflict_shown")


# --- premise, proxy, calculation, cap -------------------------------------------------------------------------------

def plan(*subs: SubQuestion) -> Plan:
    return Plan(sub_questions=list(subs))


def test_premise_check_passes_only_with_a_premise_check_step() -> None:
    question = q(kind="premise", expect_premise_check=True)
    yes = plan(SubQuestion(id="Q1", question="Is it true that ...?", is_premise_check=True))
    assert verdict(grade_run(question, run(ANSWERED, plan=yes), stored), "premise_checked")
    assert not verdict(grade_run(question, run(ANSWERED), stored), "premise_checked")


def test_proxy_passes_only_when_a_sub_question_names_one() -> None:
    question = q(kind="proxy", expect_proxy=True)
    yes = plan(SubQuestion(id="Q1", question="Most popular?", proxy="most GitHub stars"))
    assert verdict(grade_run(question, run(ANSWERED, plan=yes), stored), "proxy_named")
    assert not verdict(grade_run(question, run(ANSWERED), stored), "proxy_named")


def test_calculation_passes_only_when_recorded_and_cited() -> None:
    question = q(kind="calculation", expect_calculation=True)
    calc = [Calculation(id="C1", expression="30 * 2", result="60")]
    cited = ANSWERED.replace("[F1].", "[F1]. Twice that is 60 [C1].")
    assert verdict(grade_run(question, run(cited, calculations=calc), stored), "calculation_used")
    assert not verdict(grade_run(question, run(ANSWERED, calculations=calc), stored), "calculation_used")
    assert not verdict(grade_run(question, run(ANSWERED), stored), "calculation_used")


def test_sub_questions_capped() -> None:
    three = plan(*(SubQuestion(id=f"Q{i}", question=f"part {i}?") for i in range(1, 4)))
    assert verdict(grade_run(q(max_sub_questions=3), run(ANSWERED, plan=three), stored), "sub_questions_capped")
    assert not verdict(grade_run(q(max_sub_questions=2), run(ANSWERED, plan=three), stored), "sub_questions_capped")
    assert verdict(grade_run(q(), run(ANSWERED, plan=three), stored, max_sub_questions=4), "sub_questions_capped")
    assert not any(e.name == "sub_questions_capped" for e in grade_run(q(), run(ANSWERED), stored).expectations)


def test_a_failed_run_does_not_pass_even_with_its_expectations_met() -> None:
    assert not grade_run(q(), run(ANSWERED, status="failed"), stored).passed


# --- report measures --------------------------------------------------------------------------------------------

def test_share_of_sentences_cited_and_of_numbers_found_in_cited_quotes() -> None:
    md = "# Q\n\nEmirates bought 30 jets [F1]. It paid 12 billion for them [F1]. An uncited line with 5 figures.\n"
    g = grade_run(q(), run(md), stored)
    assert g.sentences_cited == pytest.approx(2 / 3)
    assert g.numbers_in_quotes == pytest.approx(1 / 3)  # 30 is in F1's quote; 12 and 5 are in no cited quote
    assert (g.cost_usd, g.input_tokens, g.output_tokens, g.model_calls, g.wall_seconds) == (0.25, 10, 5, 2, 1.5)


def test_attribution_dates_count_as_found() -> None:
    assert grade_run(q(), run(ANSWERED), stored).numbers_in_quotes == 1.0


# --- the suite summary ------------------------------------------------------------------------------------------

def test_pass_k_needs_every_repeat_to_pass() -> None:
    question = q(answer_terms=["30"])
    good = run(ANSWERED)
    bad = run(ANSWERED.replace("[F1]", "[F4]"))  # cites a finding without the answer
    grades = [grade_run(question, good, stored, repeat=0), grade_run(question, bad, stored, repeat=1),
              grade_run(q(id="q2", answer_terms=["30"]), good, stored, repeat=0),
              grade_run(q(id="q2", answer_terms=["30"]), good, stored, repeat=1)]
    s = grade_suite(grades, repeats=2).modes["extractive"]
    assert s.runs == 4 and s.questions == 2 and s.pass_rate == 0.75 and s.pass_k == 0.5
    assert s.expectation_rate["answer"] == 0.75 and s.expectation_pass_k["answer"] == 0.5
    assert s.expectation_pass_k["citations_verified"] == 1.0
    assert s.failed_questions == {"q1": ["answer"]}
    assert grade_suite(grades[2:3], repeats=2).modes["extractive"].pass_k == 0.0  # a missing repeat is not a pass


# --- suite files ------------------------------------------------------------------------------------------------

def write(tmp_path: Path, data: object) -> Path:
    p = tmp_path / "s.json"
    p.write_text(json.dumps(data), encoding="utf-8")
    return p


SUITE = {"name": "t", "version": "1", "corpus": "news", "questions": [
    {"id": "a", "split": "dev", "question": "How many jets?", "kind": "single_page",
     "answer_terms": ["30", ["x", "y"]]},
    {"id": "b", "split": "test", "question": "Who won?", "kind": "unanswerable", "expect_gap": True}]}


def test_suite_loads(tmp_path: Path) -> None:
    s = load_suite(write(tmp_path, SUITE))
    assert s.questions[0].answer_terms == [["30"], ["x", "y"]] and s.cap(s.questions[1]) == 4


@pytest.mark.parametrize(("change", "expected"), [
    (lambda d: d["questions"][1].update(kind="guess"), ["question 'b' (#2)", "field 'kind'"]),
    (lambda d: d["questions"][0].update(gold_pages=["ftp://x"]), ["question 'a' (#1)", "field 'gold_pages'"]),
    (lambda d: d["questions"][0].update(expect_gaps=True), ["question 'a' (#1)", "field 'expect_gaps'"]),
    (lambda d: d["questions"][0].pop("question"), ["question 'a' (#1)", "field 'question'"]),
    (lambda d: d["questions"][1].update(expect_gap=False), ["question 'b' (#2)", "expect_gap"]),
    (lambda d: d["questions"][1].update(id="a"), ["#2", "'a'", "unique"]),
    (lambda d: d.pop("version"), ["field 'version'"]),
])
def test_a_schema_error_names_the_file_question_and_field(tmp_path: Path, change: object, expected: list[str]) -> None:
    data = json.loads(json.dumps(SUITE))
    change(data)  # type: ignore[operator]
    path = write(tmp_path, data)
    with pytest.raises(SuiteError) as e:
        load_suite(path)
    for text in [str(path), *expected]:
        assert text in str(e.value)


def test_a_file_that_is_not_json_is_named(tmp_path: Path) -> None:
    p = tmp_path / "bad.json"
    p.write_text("{", encoding="utf-8")
    with pytest.raises(SuiteError, match="bad.json: not valid JSON"):
        load_suite(p)


# --- negative rejection and counterfactual robustness ------------------------------------------------------------

NOT_SAID = "# Q\n\nThe pages read do not say how many jets Emirates ordered.\n"


def test_nothing_stated_passes_only_when_no_finding_is_cited() -> None:
    quiet = grade_run(q(kind="unanswerable", expect_gap=True, expect_nothing_stated=True), run(NOT_SAID), stored)
    assert verdict(quiet, "nothing_stated") and expectation(quiet, "nothing_stated").detail == "no finding cited"
    stated = grade_run(q(kind="unanswerable", expect_gap=True, expect_nothing_stated=True), run(ANSWERED), stored)
    assert not verdict(stated, "nothing_stated") and "F1" in expectation(stated, "nothing_stated").detail


CONFLICTED = ("# Q\n\nPage S2 says \"The US wants the UK to extradite Assange, 47, over the 2010 leaks.\" [F2]\n\n"
              "Page S3 says \"The 48-year-old Australian was evicted in April\" [F3]\n")


def test_a_wrong_answer_cited_alone_fails_and_passes_when_a_conflict_sets_another_value_beside_it() -> None:
    asked = q(question="How old is Assange?", answer_terms=["48"], wrong_answers=["47"])
    silent = grade_run(asked, run(CONFLICTED), stored)
    assert not verdict(silent, "wrong_not_silent") and "F2" in expectation(silent, "wrong_not_silent").detail
    shown = Conflict(sub_question="Q1", findings=["F2", "F3"], description="S2 says 47; S3 says 48")
    assert verdict(grade_run(asked, run(CONFLICTED, conflicts=[shown]), stored), "wrong_not_silent")
    only_wrong = Conflict(sub_question="Q1", findings=["F2", "F2"], description="one side only")
    assert not verdict(grade_run(asked, run(CONFLICTED, conflicts=[only_wrong]), stored), "wrong_not_silent")


def test_no_wrong_answer_cited_passes_wrong_not_silent() -> None:
    g = grade_run(q(answer_terms=["30"], wrong_answers=["31"]), run(ANSWERED), stored)
    assert verdict(g, "wrong_not_silent")
