"""The extractive mode's steps, with no model anywhere: a plan made by code, sentences selected by code and verified
as findings like any other, and a report written by a template that only attributes quotes, never paraphrases."""
from __future__ import annotations

import re
from urllib.parse import urlsplit

from pipeline.core import ids
from pipeline.core.event_types import FindingEvent, RejectedEvent, StepEvent
from pipeline.core.schema import Conflict, Finding, Plan, Problem, Source, SubQuestion
from pipeline.research.context import RunContext
from pipeline.research.extractive.analysis import TYPED, Part, analyse_part
from pipeline.research.extractive.answers import answer_values, same_value
from pipeline.research.extractive.questions import split_question_result
from pipeline.research.extractive.select import PageText, Pick, SentenceIndex, select_sentences
from pipeline.research.steps.checks import Evidence, check_report, numbers_in
from pipeline.research.steps.conflicts import answer_conflicts
from pipeline.research.steps.defang import defang_bare
from pipeline.research.steps.write import gap_sentence, inert, label, no_evidence_report

STEP = "extract"
# From the first mark of a run only, and whole: as sentences._END, linear on a long run of marks.
_SENTENCE_END = re.compile(r"(?<![.?!;:])[.?!;:]++(?=\s|$)")
PICKS_PER_SUB_QUESTION = 3
LABEL = ("_Machine-assisted research report, extractive (no model): every sentence below was selected by code from a "
         "fetched page and is a verbatim quote located in it; no model wrote or judged anything. Check the sources "
         "before relying on it._")


def plan_by_code(question: str) -> Plan:
    """At most four sub-questions split from the question's own parts, each with 2-3 search queries."""
    split = split_question_result(question)
    sub_questions = [SubQuestion(id=f"{ids.SUB_QUESTION}{i}", question=part.question, queries=part.queries,
                                 success_criterion="a sentence of a fetched page that answers it")
                     for i, part in enumerate(split.parts, 1)]
    if not sub_questions:  # nothing searchable (only stop words): the question itself is the one gap
        sub_questions = [SubQuestion(id=f"{ids.SUB_QUESTION}1", question=question, queries=[])]
    return Plan(sub_questions=sub_questions, not_researched=split.dropped)


def parts_of(question: str, plan: Plan) -> dict[str, Part]:
    """Each sub-question's analysis (its focus, constraints and the context it inherits), by sub-question id: from the
    question's own split when the plan came from it, else from the sub-question's text alone."""
    split = {p.question: p.part for p in split_question_result(question).parts if p.part is not None}
    return {sq.id: split.get(sq.question) or analyse_part(sq.question) for sq in plan.sub_questions}


def select_findings(question: str, plan: Plan, ctx: RunContext) -> list[Problem]:
    """Record the best sentences of every fetched page for each sub-question as findings, verified by the notebook:
    the direct answer first, then up to two supporting quotes.

    A sentence whose report line would fail the reviewer's checks (cut in two by its sentence splitter, a URL that
    was not fetched) is skipped, so the report this mode writes always passes them.
    """
    ctx.events.emit(StepEvent(name=STEP, status="started", sub_questions=len(plan.sub_questions)))
    sources = ctx.notebook.sources()
    by_id = {s.id: s for s in sources}
    index = _index(sources, ctx)
    parts = parts_of(question, plan)
    problems: list[Problem] = []
    recorded = 0
    for sq in plan.sub_questions:
        if not sq.queries:
            continue
        picks = select_sentences(parts[sq.id], index, k=PICKS_PER_SUB_QUESTION * 2, per_page=PICKS_PER_SUB_QUESTION)
        kept = 0
        for pick in picks:
            if kept == PICKS_PER_SUB_QUESTION or not _checkable(pick.text, by_id[pick.source_id]):
                continue
            outcome = ctx.notebook.add_finding(source=pick.source_id, claim=pick.text, quote=pick.text,
                                               sub_question=sq.id, confidence="medium")
            if isinstance(outcome, Finding):
                # The claim is the quote itself, word for word, so the quote supports it by construction.
                ctx.notebook.set_support(outcome.id, "supported")
                ctx.events.emit(FindingEvent(id=outcome.id, source=outcome.source, sub_question=sq.id))
                kept += 1
                recorded += 1
            else:  # our selector and the quote matcher disagree: a bug worth seeing, not a reason to stop
                ctx.stats.bump("quotes_rejected")
                ctx.events.emit(RejectedEvent(source=outcome.source, reason=outcome.reason, sub_question=sq.id))
                problems.append(Problem(kind="quote_rejected", step=STEP,
                                        message=f"a selected sentence of {pick.source_id} was not verified: "
                                                f"{outcome.reason}"))
    ctx.stats.bump("findings_recorded", recorded)
    ctx.events.emit(StepEvent(name=STEP, status="finished", findings=recorded))
    return problems


def weak_parts(question: str, plan: Plan, ctx: RunContext) -> set[str]:
    """The searchable sub-questions whose best answer so far is weak: no sentence of the pages read answers them, or
    only one page says it (nothing corroborates it, and nothing could show a conflict). For a part whose answer is a
    name, a figure or a date, a page corroborates the best answer only by offering that same value. Nothing is
    recorded."""
    index = _index(ctx.notebook.sources(), ctx)
    parts = parts_of(question, plan)
    weak = set()
    for sq in plan.sub_questions:
        if sq.queries and not _corroborated(parts[sq.id], select_sentences(parts[sq.id], index, k=6)):
            weak.add(sq.id)
    return weak


def _index(sources: list[Source], ctx: RunContext) -> SentenceIndex:
    """The sentences of every page read, each page with its title, date and site."""
    return SentenceIndex.build([PageText(source_id=s.id, title=s.title, text=ctx.notebook.text(s.id),
                                         published=s.published, site=_host(s.final_url or s.url))
                                for s in sources])


def _host(url: str) -> str | None:
    try:
        return urlsplit(url).hostname
    except ValueError:  # "http://[::1": no host to name the page by
        return None


def _corroborated(part: Part, picks: list[Pick]) -> bool:
    """Whether a second page says what the best pick says: any pick of another page, or for a typed part one that
    offers one of the best pick's values."""
    if not picks:
        return False
    best = answer_values(picks[0].text, part)
    others = [p for p in picks[1:] if p.source_id != picks[0].source_id]
    if part.focus.answer_type not in TYPED or not best:
        return bool(others)
    return any(same_value(v, o) for p in others for o in answer_values(p.text, part) for v in best)


def typed_conflicts(question: str, plan: Plan, findings: list[Finding], sources: list[Source],
                    known: list[Conflict]) -> list[Conflict]:
    """Conflicts between quotes of different pages that answer one sub-question with different answers of its type
    (research/steps/conflicts.py), each sub-question analysed as the selector saw it."""
    return answer_conflicts(plan, findings, sources, known, parts_of(question, plan))


def _checkable(quote: str, source: Source) -> bool:
    """Whether the report line quoting `quote` from `source` passes the reviewer's code checks on its own."""
    trial = Finding(id="F1", source=source.id, claim=quote, quote=quote, start=0, end=len(quote))
    return not check_report(_attribution(trial, {source.id: source}), Evidence(findings=[trial], sources=[source]))


def _name(source: Source | None, allowed: set[str]) -> str:
    """How a line names its source: the title, else the host, else its id; never a figure no quote holds.

    A sentence end followed by a space is taken out of a title, so a title cannot end the line's sentence before its
    citation; a dot inside a word stays ("SpaceNews.com").
    """
    if source is None:
        return "an unrecorded source"
    title = _SENTENCE_END.sub(" ", source.title or "")
    for name in (title, urlsplit(source.final_url).hostname or ""):
        name = " ".join(name.removeprefix("www.").split()).strip(" .?!;:")[:120]
        if name and numbers_in(name) <= allowed:
            return inert(name)
    return f"source {source.id}"


def _attribution(f: Finding, sources: dict[str, Source]) -> str:
    """'Quoted from <title> (<date>): "<quote>" [F3].' - the quote exactly as located, the source named.

    The line starts with fixed words, so no page title can make it a heading, a label or a table row.
    """
    src = sources.get(f.source)
    published = src.published if src and src.published else None
    allowed = numbers_in(f.quote) | (numbers_in(published) if published else set())
    when = f" ({published})" if published else ""
    # An address the page quotes is shown defanged, as in the Sources section: only fetched pages are ever linked.
    quote = defang_bare(inert(f.quote).rstrip(), [u for s in sources.values() for u in (s.url, s.final_url)])
    return f'Quoted from {_name(src, allowed)}{when}: "{quote}" [{f.id}].'


def _part_lines(found: list[Finding], conflicts: list[Conflict], sources: dict[str, Source]) -> list[str]:
    """One part's answer: its best quote, the quotes that disagree with it side by side, then the supporting ones."""
    disputed = list(dict.fromkeys(i for c in conflicts for i in c.findings))
    by_id = {f.id: f for f in found}
    if disputed:
        lines = ["### Sources disagree", ""]
        lines += [f"- {_attribution(by_id[i], sources)}" for i in disputed if i in by_id]
        rest = [f for f in found if f.id not in disputed]
        return lines + ([""] + [" ".join(_attribution(f, sources) for f in rest)] if rest else []) + [""]
    best, *support = found
    lines = [_attribution(best, sources), ""]
    if support:
        lines += [" ".join(_attribution(f, sources) for f in support), ""]
    return lines


def extractive_report(question: str, plan: Plan, evidence: Evidence, conflicts: list[Conflict]) -> str:
    """The report: per sub-question its direct answer (the best quote), conflicts beside it, then supporting quotes,
    or the gap that names it; then what the plan left out."""
    if not evidence.findings:
        return no_evidence_report(question, evidence).replace(label(evidence), LABEL, 1)
    sources = {s.id: s for s in evidence.sources}
    gap_of = dict(zip(evidence.gaps, evidence.gap_ids(), strict=True))
    lines = [f"# {inert(question) or 'Research report'}", "", LABEL, ""]
    several = len(plan.sub_questions) > 1
    for sq in plan.sub_questions:
        found = [f for f in evidence.findings if f.sub_question == sq.id]
        if several:
            lines += [f"## {inert(sq.question)}", ""]
        if found:
            lines += _part_lines(found, [c for c in conflicts if c.sub_question == sq.id], sources)
        elif sq.question in gap_of:
            lines += [gap_sentence(sq.question, gap_of[sq.question]), ""]
    others = [(g, gid) for g, gid in gap_of.items() if g not in {sq.question for sq in plan.sub_questions}]
    if others:
        lines += ["## Not established", ""]
        lines += [f"- {gap_sentence(g, gid)}" for g, gid in others]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
