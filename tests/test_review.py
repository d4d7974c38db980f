"""The reviewer (code checks + sentence judge) and the write -> review -> revise loop, on the loopback fake model."""
from __future__ import annotations

import html
import re

import pytest
from test_write import GAPS, QUESTION, World, corpus, world  # noqa: F401  (corpus, world: fixtures)

from pipeline.research.prompts import load
from pipeline.research.steps.checks import sentences
from pipeline.research.steps.review import review, write_and_review

CLEAN = [
    "The city council approved a budget of 12 million euros for 2024 [F1].",
    "Monthly passes cost 49 euros from June [F2].",
    "Bus ridership rose by 8 percent over the year (one source, low confidence) [F3].",
    f"No fetched source established this: {GAPS[0].rstrip('?')} [G1].",
]


def revision_problem_kinds(world: World) -> list[list[str]]:
    """The problem kinds sent back to the writer, per revision request."""
    return [re.findall(r'<problem kind="(\w+)"', r.last_user_text) for r in world.writer_requests()[1:]]


def judged(world: World) -> list[str]:
    return [html.unescape(re.search(r"<sentence>(.*?)</sentence>", r.last_user_text, re.S).group(1))
            for r in world.judge_requests()]


# -- the loop fixes what the reviewer finds -----------------------------------------------------------
@pytest.mark.parametrize("fault, kinds", [
    ("unknown_id", ["unknown_citation", "number_not_in_quote"]),
    ("uncited", ["uncited"]),
    ("invented_number", ["number_not_in_quote"]),
    ("unsupported", ["judge_unsupported"]),
])
def test_a_faulty_first_draft_is_caught_and_fixed_in_round_two(world: World, fault: str, kinds: list[str]) -> None:
    world.brain.faults = {fault}
    outcome = write_and_review(QUESTION, world.evidence, [], world.ctx, rounds=2)
    assert outcome.problems == [] and outcome.rounds_used == 1
    assert len(world.writer_requests()) == 2 and revision_problem_kinds(world) == [kinds]
    assert sentences(outcome.markdown) == CLEAN
    assert world.ctx.stats.snapshot().review_rounds == 1
    assert not any(bad in outcome.markdown for bad in ("[F9]", "65/month", "free buses"))


def test_a_writer_that_never_fixes_stops_after_n_rounds_with_the_problems(world: World) -> None:
    world.brain.faults = {"stubborn", "invented_number"}
    outcome = write_and_review(QUESTION, world.evidence, [], world.ctx, rounds=2)
    assert len(world.writer_requests()) == 3 and outcome.rounds_used == 2
    assert world.ctx.stats.snapshot().review_rounds == 2
    assert [p.kind for p in outcome.problems] == ["number_not_in_quote"]
    assert "65/month" in outcome.problems[0].sentence and "65/month" in outcome.markdown


def test_a_revision_with_more_problems_than_its_draft_is_not_kept(world: World) -> None:
    world.brain.faults = {"uncited", "regress"}
    outcome = write_and_review(QUESTION, world.evidence, [], world.ctx, rounds=1)
    assert len(world.writer_requests()) == 2 and outcome.rounds_used == 1
    assert [(p.kind, p.sentence) for p in outcome.problems] == [
        ("uncited", "The city council approved a budget of 12 million euros for 2024.")]
    assert "Officials were pleased" not in outcome.markdown


def test_zero_rounds_means_one_draft_and_its_problems(world: World) -> None:
    world.brain.faults = {"uncited"}
    outcome = write_and_review(QUESTION, world.evidence, [], world.ctx, rounds=0)
    assert len(world.writer_requests()) == 1 and outcome.rounds_used == 0
    assert [p.kind for p in outcome.problems] == ["uncited"]


def test_the_final_markdown_is_the_body_then_sources_of_cited_findings(world: World) -> None:
    world.brain.omit = {"F2"}
    world.brain.reverse = True
    outcome = write_and_review(QUESTION, world.evidence, [], world.ctx, rounds=1)
    body, sources = outcome.markdown.split("## Sources")
    assert outcome.problems == [] and body.startswith(f"# {QUESTION}\n")
    assert re.findall(r"^- \[(F\d+)\]", sources, re.M) == ["F3", "F1"]


# -- the sentence judge ---------------------------------------------------------------------------------
def test_the_judge_sees_one_sentence_and_its_quotes_in_a_fresh_context(world: World) -> None:
    body = f"# T\n\nThe council approved 12 million euros for 2024 [F1, F3].\n{CLEAN[3]}\n"
    assert review(body, world.evidence, world.ctx) == []
    req = world.judge_requests()[0]
    f1, f3 = world.evidence.findings[0], world.evidence.findings[2]
    assert req.messages == [{"role": "user", "content": (
        "<sentence>The council approved 12 million euros for 2024 [F1, F3].</sentence>\n<quotes>\n"
        f'<quote id="F1">{f1.quote}</quote>\n<quote id="F3">{html.escape(f3.quote, quote=False)}</quote>\n</quotes>')}]
    assert req.model == world.ctx.worker_model and req.system_text == load("sentence_judge")
    assert req.output_schema is not None and set(req.output_schema["properties"]) == {"analysis", "verdict"}


def test_the_judge_flags_an_unsupported_sentence(world: World) -> None:
    body = "\n".join(["# T", "", *CLEAN, "Monthly passes were abolished in June [F2]."])
    problems = review(body, world.evidence, world.ctx)
    assert [(p.kind, p.sentence) for p in problems] == [
        ("judge_unsupported", "Monthly passes were abolished in June [F2].")]
    assert "abolished" in problems[0].message


def test_only_sentences_citing_findings_without_code_problems_are_judged(world: World) -> None:
    body = "\n".join(["# T", "", *CLEAN, "A rumour says more [F9].", "An uncited line.", "Figures soon [C1]."])
    kinds = [p.kind for p in review(body, world.evidence, world.ctx)]
    assert kinds == ["unknown_citation", "uncited", "unknown_citation"]
    assert sorted(judged(world)) == sorted(CLEAN[:3])


def test_unchanged_sentences_are_not_judged_again_in_later_rounds(world: World) -> None:
    world.brain.faults = {"unsupported"}
    write_and_review(QUESTION, world.evidence, [], world.ctx, rounds=2)
    extra = "The council also promised free buses for every resident [F1]."
    assert sorted(judged(world)) == sorted([*CLEAN[:3], extra])  # each judged once over two drafts


def test_judge_outage_becomes_judge_unavailable_problems_not_a_crash(world: World) -> None:
    world.fake.fault(lambda r: "<sentence>" in r.last_user_text, status=500, times=None)
    outcome = write_and_review(QUESTION, world.evidence, [], world.ctx, rounds=2)
    assert [p.kind for p in outcome.problems] == ["judge_unavailable"] * 3
    assert sorted(p.sentence for p in outcome.problems) == sorted(CLEAN[:3])
    assert "HTTP 500" in outcome.problems[0].message
    assert len(world.writer_requests()) == 1 and outcome.rounds_used == 0  # nothing the writer could fix


# -- the writer fails ------------------------------------------------------------------------------------
def test_writer_outage_on_the_first_draft_gives_a_code_built_report(world: World) -> None:
    world.fake.fault(lambda r: "<findings>" in r.last_user_text, status=529, times=None)
    outcome = write_and_review(QUESTION, world.evidence, [], world.ctx, rounds=2)
    assert [p.kind for p in outcome.problems] == ["writer_unavailable"]
    assert "overloaded" in outcome.problems[0].message
    body = outcome.markdown.split("## Sources")[0]
    for f in world.evidence.findings:
        assert f"{f.claim}" in body and f"[{f.id}]" in body
    assert "(low confidence) [F3]." in body and f"{GAPS[0].rstrip('.')} [G1]." in body
    assert body.splitlines()[2].startswith("_Machine-assisted")
    assert re.findall(r"^- \[(F\d+)\]", outcome.markdown, re.M) == ["F1", "F2", "F3"]
    assert len(world.judge_requests()) == 3  # the fallback is still checked


def test_writer_outage_on_a_revision_keeps_the_draft_and_its_problems(world: World) -> None:
    world.brain.faults = {"uncited"}
    world.fake.fault(lambda r: "<draft>" in r.last_user_text, status=529, times=None)
    outcome = write_and_review(QUESTION, world.evidence, [], world.ctx, rounds=2)
    assert [p.kind for p in outcome.problems] == ["uncited", "writer_unavailable"]
    assert outcome.problems[0].sentence == "The city council approved a budget of 12 million euros for 2024."
    assert outcome.problems[0].sentence in outcome.markdown
    assert outcome.rounds_used == 1


def test_step_events_mark_each_round(world: World) -> None:
    world.brain.faults = {"uncited"}
    write_and_review(QUESTION, world.evidence, [], world.ctx, rounds=2)
    steps = [(e.payload["name"], e.payload["status"], e.payload["round"]) for e in world.events.of("step")]
    assert steps == [("write", "started", 0), ("write", "finished", 0), ("review", "started", 0),
                     ("review", "finished", 0), ("write", "started", 1), ("write", "finished", 1),
                     ("review", "started", 1), ("review", "finished", 1)]
