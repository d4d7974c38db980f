"""The extractive report's layout: per part its best quote first, a conflict beside it, a gap in its place, and
source names that cannot end a sentence early; every report passes the reviewer's checks."""
from __future__ import annotations

import hashlib
import re

from pipeline.core.schema import Conflict, Finding, Plan, Source, SubQuestion
from pipeline.research.steps import extractive
from pipeline.research.steps.checks import Evidence, check_report
from pipeline.research.steps.extractive import extractive_report
from tests.regex_audit import token_texts

TEXT = {"S1": "Astrobotic won the 199.5 million dollar VIPER task order on Thursday, NASA said.",
        "S2": "Intuitive Machines won the VIPER task order, one trade site reported.",
        "S3": "The lander will carry the VIPER rover to the south pole of the Moon in 2023."}
TITLES = {"S1": "SpaceNews.com. NASA picks a lander", "S2": "Moon weekly", "S3": "Rover notes: VIPER"}


def _source(sid: str) -> Source:
    return Source(id=sid, url=f"https://{sid.lower()}.example/viper", final_url=f"https://{sid.lower()}.example/viper",
                  title=TITLES[sid], published="2020-06-11", fetched_at="2020-06-12T00:00:00+00:00",
                  sha256=hashlib.sha256(TEXT[sid].encode()).hexdigest(), chars=len(TEXT[sid]))


def _finding(fid: str, sid: str, sq: str) -> Finding:
    return Finding(id=fid, sub_question=sq, source=sid, claim=TEXT[sid], quote=TEXT[sid], start=0,
                   end=len(TEXT[sid]))


PLAN = Plan(sub_questions=[SubQuestion(id="Q1", question="Which company won the VIPER task order?"),
                           SubQuestion(id="Q2", question="When will VIPER launch?"),
                           SubQuestion(id="Q3", question="How much does the VIPER rover weigh?")])
FINDINGS = [_finding("F1", "S1", "Q1"), _finding("F2", "S2", "Q1"), _finding("F3", "S3", "Q2")]
SOURCES = [_source("S1"), _source("S2"), _source("S3")]
GAP = "How much does the VIPER rover weigh?"
CONFLICT = Conflict(sub_question="Q1", findings=["F1", "F2"], description="S1 names Astrobotic; S2 Intuitive Machines")


def _report(conflicts: list[Conflict]) -> tuple[str, Evidence]:
    evidence = Evidence(findings=FINDINGS, sources=SOURCES, gaps=[GAP], question="VIPER?")
    return extractive_report("Which company won the VIPER task order, and when will it launch?", PLAN, evidence,
                             conflicts), evidence


def test_each_part_gives_its_answer_under_its_heading_and_a_gap_stays_in_its_place() -> None:
    body, evidence = _report([])
    headings = [ln for ln in body.splitlines() if ln.startswith("#")]
    assert headings[1:] == ["## Which company won the VIPER task order?", "## When will VIPER launch?",
                            "## How much does the VIPER rover weigh?"]
    q1, q2, q3 = body.split("\n## ")[1:]
    assert q1.index("[F1]") < q1.index("[F2]")  # the best quote first, the other after it
    assert "[F3]" in q2 and "[F" not in q3 and "weigh" in q3.split("\n", 1)[1]  # the gap, named where it was asked
    assert check_report(body, evidence) == []


def test_a_conflict_is_shown_beside_its_part_with_both_sides() -> None:
    body, evidence = _report([CONFLICT])
    q1 = body.split("\n## ")[1]
    assert "### Sources disagree" in q1 and q1.count("- Quoted from") == 2
    assert "### Sources disagree" not in body.split("\n## ")[2]
    assert check_report(body, evidence) == []


def test_a_title_with_a_sentence_end_is_named_without_it_and_a_dot_inside_a_word_stays() -> None:
    body, _ = _report([])
    assert "Quoted from SpaceNews.com NASA picks a lander (2020-06-11)" in body
    assert "Quoted from Rover notes VIPER (2020-06-11)" in body


def test_a_title_loses_its_sentence_ends_as_before() -> None:
    # The former pattern restarted at each mark of a long run of them (quadratic).
    former = re.compile(r"[.?!;:]+(?=\s|$)")
    for text in token_texts([" ", "\n", ".", "?", "!!", ";", ":", "a", "x."], count=3000):
        assert extractive._SENTENCE_END.sub(" ", text) == former.sub(" ", text), text
