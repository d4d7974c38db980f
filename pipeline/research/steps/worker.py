"""The tools-mode researcher: one tool-calling worker per sub-question, in parallel, sharing one budget and notebook.

Loop rules, enforced here rather than in the prompt:
- at most `worker_max_steps` model turns, then one wrap-up turn in which only record_finding, find_in_page and
  calculate still run (searches and fetches answer REFUSED);
- every tool_use block gets exactly one tool_result, in order, in the next user message;
- an end_turn reply that describes a tool call in prose instead of making one is retried once, with a nudge;
- a reply cut at max_tokens continues with a nudge to be brief;
- a tool answering BUDGET_EXHAUSTED closes searching and fetching: the next turn is told to record what it can
  support and stop, and is the last; a model call the budget refuses ends the worker at once;
- any other model failure ends that worker with a Problem; the other workers go on.
- with `first_search="code"` (a new run's default), code runs the first suggested query and the first message
  holds its results, so the first model turn can fetch; a budget already spent ends the worker before any call.
- a page's text is in context for the turn that reads it; once a finding is recorded from it, the next request shows
  its PAGE line and a note naming those findings instead (find_in_page reads any passage again), so the text is
  not paid for on every later turn.
The system prompt and the tool list are the same bytes on every call, and a cache breakpoint moves to the newest
user turn, so each turn re-reads the conversation so far from the prompt cache. A page is taken out once, so the
conversation before it stays the cached prefix.
"""
from __future__ import annotations

import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

from pipeline.core.budget import Phase
from pipeline.core.event_types import StepEvent
from pipeline.core.schema import Finding, Plan, Problem, RunOptions, SubQuestion
from pipeline.models.base import LLMError, ToolResult, ToolResults, Turn
from pipeline.research.context import RunContext
from pipeline.research.prompts import load
from pipeline.research.steps import tags
from pipeline.research.tools.tool import ToolOutcome
from pipeline.research.tools.toolbox import TOOL_ORDER, TOOLS, Toolbox
from pipeline.store.base import StoreError

MAX_TOKENS = 2_048
# Control messages of the loop: short, fixed, and chosen by code, so they stay here beside the rules they enforce.
NUDGE_PROSE = "You described a tool call but did not make one. Call the tool, or finish."
NUDGE_BRIEF = ("Your last reply was cut off at the output limit. Be brief: make one tool call at a time, "
               "or finish with a short summary.")
NOTE_BUDGET = ("The research budget is spent: searching and fetching are closed. Record with record_finding what "
               "the pages you already fetched support, then stop with your one-paragraph summary.")
PAGE_READ = ("(PAGE_TEXT_REMOVED: you read this page's text in an earlier turn. Findings recorded from {source}: "
             "{findings}. find_in_page with {source} reads any passage of it again.)")
NOTE_WRAP_UP = ("You have reached your step limit; this is your last turn. Searching and fetching are closed. "
                "Record with record_finding the findings the pages you already fetched support now, then stop "
                "with your one-paragraph summary.")

Ended = Literal["done", "step_limit", "budget", "failed"]
Judge = Callable[[list[Finding]], None]  # takes findings to judge while the worker goes on

_NAMES = "|".join(TOOL_ORDER)
# Conservative: a tool named with call syntax or call markup, or a first-person announcement of a tool action.
# A summary in the past tense ("I searched", "I fetched") does not match.
_PROSE_CALL = re.compile(
    rf"\b(?:{_NAMES})\s*\("
    rf"|[\"']name[\"']\s*:\s*[\"'](?:{_NAMES})[\"']"
    r"|<\s*(?:function_calls|invoke|tool_use)\b"
    r"|\b(?:I\s+will|I['’]ll|I\s+am\s+going\s+to|I['’]m\s+going\s+to|let\s+me)\s+"
    r"(?:now\s+|first\s+|then\s+|next\s+)?"
    rf"(?:search|fetch|look\s+up|open|record|calculate|call|use\s+(?:the\s+)?(?:{_NAMES}))\b",
    re.IGNORECASE,
)


def describes_tool_call(text: str) -> bool:
    """True when a reply announces or spells out a tool call in prose instead of making it."""
    return bool(_PROSE_CALL.search(text))


def first_message(sq: SubQuestion, searched: str | None = None) -> str:
    """The worker's first user message, in a fixed format (pinned by tests/test_worker.py); `searched` is the
    web_search result of the first suggested query when code ran it."""
    queries = "\n".join(tags.text(" ".join(q.split())) for q in sq.queries if q.strip())
    found = f"\n<search_results>\n{tags.text(searched)}\n</search_results>" if searched is not None else ""
    return (f'<sub_question id="{tags.attr(sq.id)}">{tags.text(sq.question)}'
            f"</sub_question>\n<success_criterion>{tags.text(sq.success_criterion)}"
            f"</success_criterion>\n<suggested_queries>\n{queries}\n</suggested_queries>{found}")


@dataclass(frozen=True)
class WorkerResult:
    """How one worker ended."""

    sub_question: str
    steps: int
    ended: Ended
    problem: Problem | None = None


def research_tools(plan: Plan, ctx: RunContext, options: RunOptions, *, judge: Judge | None = None) -> list[Problem]:
    """Run one worker per sub-question in parallel; findings land in ctx.notebook, and each turn's new ones are
    handed to `judge` (SupportJudging.submit) while the worker goes on; returns what went wrong."""
    subs = plan.sub_questions
    if not subs:
        return []
    system = load("worker")
    with ThreadPoolExecutor(max_workers=len(subs), thread_name_prefix="worker") as pool:
        results = list(pool.map(lambda sq: run_worker(sq, ctx, options, system, judge=judge), subs))
    return [r.problem for r in results if r.problem is not None]


def warm_workers(ctx: RunContext) -> threading.Thread:
    """Start writing the workers' shared prefix (system prompt and tools) into the prompt cache, while the plan is
    made: the workers then start together and all read it, where each would otherwise write it."""
    def warm() -> None:
        try:
            ctx.llm.warm_prefix(model=ctx.worker_model, system=load("worker"), tools=TOOLS)
        except StoreError:  # the run's recorder holds the error and stops the run at its next event
            pass

    thread = threading.Thread(target=warm, name="warm-workers", daemon=True)
    thread.start()
    return thread


def run_worker(sq: SubQuestion, ctx: RunContext, options: RunOptions, system: str | None = None, *,
               judge: Judge | None = None) -> WorkerResult:
    """One sub-question's tool loop, with start and finish reported as step events."""
    ctx.events.emit(StepEvent(name="worker", sub_question=sq.id, status="started"))
    result = _Loop(sq, ctx, options, system or load("worker"), judge).run()
    ctx.events.emit(StepEvent(
        name="worker", sub_question=sq.id, status="finished", steps=result.steps, ended=result.ended,
        findings=sum(1 for f in ctx.notebook.findings() if f.sub_question == sq.id),
    ))
    return result


class _Loop:
    def __init__(self, sq: SubQuestion, ctx: RunContext, options: RunOptions, system: str, judge: Judge | None):
        self.sq, self.ctx, self.options, self.system, self.judge = sq, ctx, options, system, judge
        self.box = Toolbox(ctx, sq, results=options.results_per_query)
        self.searched = self._first_search()
        self.turns: list[Turn] = [first_message(sq, self.searched.text if self.searched else None)]
        self.steps = 0
        self.unread: list[tuple[int, int, str]] = []  # (turn, result, source id) of page text not yet read

    def run(self) -> WorkerResult:
        if self.searched is not None and self.searched.budget_exhausted:
            return self._end("budget")  # nothing fetched, nothing to record: a model call would find nothing
        nudged = False
        last: Ended | None = None  # set when the next turn is the final one, and why
        while True:
            try:
                reply = self.ctx.llm.tool_turn(model=self.ctx.worker_model, system=self.system, turns=self.turns,
                                               max_tokens=MAX_TOKENS, tools=TOOLS, phase=Phase.RESEARCH,
                                               purpose=f"worker:{self.sq.id}")
            except LLMError as e:
                if e.kind == "budget":
                    return self._end("budget")
                message = f"The research worker for {self.sq.id} stopped: {e.message}"
                return self._end("failed", Problem(kind="worker_failed", step="research", message=message))
            self.steps += 1
            self.turns.append(reply)
            outcomes = [self.box.run(use.name, use.input) for use in reply.tool_uses]
            if self.judge is not None and any(o.finding is not None for o in outcomes):
                self.judge([o.finding for o in outcomes if o.finding is not None])
            if last is not None:
                return self._end(last)  # the final turn's calls ran; nobody will read their results
            notes: list[str] = []
            if any(o.budget_exhausted for o in outcomes):
                last = "budget"
                notes.append(NOTE_BUDGET)
            if reply.stop_reason == "max_tokens":
                notes.append(NUDGE_BRIEF)
            elif not reply.tool_uses:
                if nudged or reply.stop_reason != "end_turn" or not describes_tool_call(reply.text):
                    return self._end("done")
                nudged = True
                notes.append(NUDGE_PROSE)
            if last is None and self.steps >= self.options.worker_max_steps:
                last = "step_limit"
                notes = [n for n in notes if n != NUDGE_PROSE] + [NOTE_WRAP_UP]
            if last is not None:
                self.box.close_gathering()
            self._take_out_read_pages()
            self.turns.append(ToolResults(
                [ToolResult(use.id, outcome.text, outcome.is_error)
                 for use, outcome in zip(reply.tool_uses, outcomes, strict=True)],  # one result per call, in order
                "\n".join(notes) or None))
            self.unread += [(len(self.turns) - 1, i, o.page) for i, o in enumerate(outcomes) if o.page is not None]

    def _first_search(self) -> ToolOutcome | None:
        """The first suggested query's web_search, run by code when the run says so (the turn a worker would
        spend asking for it is one model round and one resend of the prefix); None otherwise."""
        query = next((q for q in self.sq.queries if q.strip()), None)
        if self.options.first_search != "code" or query is None:
            return None
        return self.box.run("web_search", {"query": query})

    def _take_out_read_pages(self) -> None:
        """Replace the text of each page read in an earlier reply that a finding was recorded from by its PAGE line
        and a note; a page nothing was recorded from stays, for a later turn (the wrap-up) to record from."""
        kept = []
        for turn, i, source in self.unread:
            found = [f.id for f in self.ctx.notebook.findings() if f.source == source and f.sub_question == self.sq.id]
            if not found:
                kept.append((turn, i, source))
                continue
            results = self.turns[turn]
            assert isinstance(results, ToolResults)
            shown = list(results.results)
            head = shown[i].content.split("\n", 1)[0]
            shown[i] = ToolResult(shown[i].tool_use_id, head + "\n" + PAGE_READ.format(
                source=source, findings=", ".join(found)), shown[i].is_error)
            self.turns[turn] = ToolResults(shown, results.note)
        self.unread = kept

    def _end(self, ended: Ended, problem: Problem | None = None) -> WorkerResult:
        return WorkerResult(self.sq.id, self.steps, ended, problem)
