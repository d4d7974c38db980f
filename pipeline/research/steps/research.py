"""The fixed-mode researcher: code runs each sub-question's queries, ranks the results and fetches the top pages.

No model in this loop. Determinism: searches run one after another in plan order; fetches run in parallel in
"waves" (each sub-question still short of pages contributes as many next candidates as it lacks, taken
round-robin in plan order), and a wave never holds more new URLs than the fetches the budget has left, so which
pages are fetched does not depend on thread timing, and a short budget is shared fairly between sub-questions.
Successful pages are added to the notebook in plan order after fetching, so source ids (S1..) are deterministic
too. (Only if something outside this step spends fetches at the same time could a wave meet a budget refusal;
the step then stops fetching, and which of that wave's pages got through depends on timing.)
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import repeat
from urllib.parse import urlsplit

from pipeline.core.budget import Phase
from pipeline.core.event_types import StepEvent
from pipeline.core.schema import FetchResult, Plan, RunOptions, SearchResult, SubQuestion
from pipeline.core.urls import normalise_url, url_key
from pipeline.research.context import RunContext

STEP = "research"
MAX_FETCH_THREADS = 4


@dataclass(frozen=True)
class Candidate:
    """A search result to consider fetching: its best provider rank over all queries, and how many queries found it."""

    url: str
    key: str
    host: str
    best_rank: int
    hits: int
    first_seen: int


@dataclass
class _Progress:
    """One sub-question's fetching state."""

    queue: list[Candidate]
    pages: list[FetchResult] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)


def research_fixed(plan: Plan, ctx: RunContext, options: RunOptions) -> dict[str, list[str]]:
    """Sub-question id -> ids of the sources fetched for it (best first); every sub-question has an entry."""
    gathering = FixedResearch(plan, ctx, options)
    gathering.fetch(options.pages_per_sub_question)
    return gathering.finish()


class FixedResearch:
    """The fixed researcher in its stages: search every sub-question (at construction), fetch pages in waves, then
    register them as sources in plan order; `read_more` fetches further results for some sub-questions later."""

    def __init__(self, plan: Plan, ctx: RunContext, options: RunOptions):
        ctx.events.emit(StepEvent(name=STEP, status="started", mode="fixed", sub_questions=len(plan.sub_questions)))
        self.plan, self.ctx = plan, ctx
        self.progress = {sq.id: _Progress(queue=rank(_search(sq, ctx, options))) for sq in plan.sub_questions}
        self.budget_stopped = False

    def fetch(self, want: int, only: set[str] | None = None) -> None:
        """Fill each sub-question (of `only`, when given) with up to `want` pages."""
        progress = {k: p for k, p in self.progress.items() if only is None or k in only}
        self.budget_stopped = _fetch_all(progress, self.ctx, want) or self.budget_stopped

    def read_more(self, sub_questions: set[str]) -> int:
        """Fetch every result left for `sub_questions`, as far as the budget allows; the pages added."""
        before = sum(len(p.pages) for p in self.progress.values())
        self.ctx.events.emit(StepEvent(name=STEP, status="started", mode="fixed", part="read_more",
                                       sub_questions=len(sub_questions)))
        want = max((len(p.pages) + len(p.queue) for k, p in self.progress.items() if k in sub_questions), default=0)
        self.fetch(want, only=sub_questions)
        added = sum(len(p.pages) for p in self.progress.values()) - before
        self.finish(part="read_more")
        return added

    def finish(self, part: str | None = None) -> dict[str, list[str]]:
        """Register every page fetched as a source, in plan order; sub-question id -> its source ids, best first."""
        out: dict[str, list[str]] = {}
        for sq in self.plan.sub_questions:
            ids: list[str] = []
            for page in self.progress[sq.id].pages:
                sid = self.ctx.notebook.add_source(page).id
                if sid not in ids:
                    ids.append(sid)
            out[sq.id] = ids
        event = StepEvent(name=STEP, status="finished", mode="fixed", sources=out, budget_stopped=self.budget_stopped)
        if part:  # set only when given, so the payload's keys stay those of stores recorded before it existed
            event.part = part
        self.ctx.events.emit(event)
        return out


def _search(sq: SubQuestion, ctx: RunContext, options: RunOptions) -> list[Candidate]:
    """Every query's results merged by normalised URL, unranked (in order of first appearance)."""
    merged: dict[str, Candidate] = {}
    for query in sq.queries:
        outcome = ctx.search.search(query, n=options.results_per_query, phase=Phase.RESEARCH)
        for rank_, result in enumerate(outcome.results):
            c = _candidate(result, rank_, len(merged))
            if c is None:
                continue
            old = merged.get(c.key)
            merged[c.key] = c if old is None else Candidate(
                old.url, old.key, old.host, min(old.best_rank, rank_), old.hits + 1, old.first_seen)
    return list(merged.values())


def _candidate(result: SearchResult, rank_: int, seen: int) -> Candidate | None:
    try:
        key = normalise_url(result.url)
    except ValueError:
        return None
    if urlsplit(key).scheme not in ("http", "https", "doc"):
        return None
    return Candidate(result.url, key, _host(key), rank_, 1, seen)


def _host(key: str) -> str:
    if key.startswith("doc:"):  # each file of a documents folder is a host of its own
        return key
    host = urlsplit(key).hostname or ""
    return host[4:] if host.startswith("www.") else host


def rank(candidates: list[Candidate]) -> list[Candidate]:
    """Best provider rank first (then found by more queries, then first seen); each host once before any twice."""
    ordered = sorted(candidates, key=lambda c: (c.best_rank, -c.hits, c.first_seen))
    seen: dict[str, int] = {}
    rounds = []
    for position, c in enumerate(ordered):
        rounds.append((seen.get(c.host, 0), position, c))
        seen[c.host] = seen.get(c.host, 0) + 1
    return [c for _round, _pos, c in sorted(rounds, key=lambda t: (t[0], t[1]))]


def _fetch_all(progress: dict[str, _Progress], ctx: RunContext, want: int) -> bool:
    """Fill each sub-question with up to `want` pages, in waves; True when the fetch budget stopped it."""
    results: dict[str, FetchResult] = {}  # by normalised URL: no URL is fetched twice in this step
    with ThreadPoolExecutor(max_workers=MAX_FETCH_THREADS, thread_name_prefix="fetch") as pool:
        while True:
            wave = _next_wave(progress, results, want, ctx.budget.remaining("fetches", Phase.RESEARCH))
            if wave is None:
                return True
            if not wave:
                return False
            todo = list(dict.fromkeys(c.key for _sq, c in wave if c.key not in results))
            urls = {c.key: c.url for _sq, c in wave}
            # The URLs are looked up now, not inside the worker threads, so no call sees a later wave's `urls`.
            pages = pool.map(ctx.fetcher.fetch, [urls[key] for key in todo], repeat(Phase.RESEARCH))
            for key, page in zip(todo, pages, strict=True):
                results[key] = page
            _take(wave, progress, results)
            if any(results[key].error_kind == "budget" for key in todo):
                return True


def _next_wave(progress: dict[str, _Progress], results: dict[str, FetchResult], want: int,
               left: int) -> list[tuple[str, Candidate]] | None:
    """The next candidates of every unfilled sub-question, round-robin so a short budget is shared fairly, with
    at most `left` URLs not fetched yet; [] when all are done, None when only the budget stands in the way."""
    wave: list[tuple[str, Candidate]] = []
    new: set[str] = set()
    blocked = False
    for round_ in range(want):
        for sq_id, p in progress.items():
            if len(p.pages) + round_ >= want:
                continue
            while p.queue:
                c = p.queue[0]
                known = results.get(c.key)
                if c.key in p.keys or (known is not None and not known.ok):
                    p.queue.pop(0)  # already this sub-question's page, or a URL that failed: try the next one
                    continue
                if known is None and c.key not in new and len(new) >= left:
                    blocked = True
                    break
                p.queue.pop(0)
                if known is None:
                    new.add(c.key)
                wave.append((sq_id, c))
                break
    if not wave and blocked:
        return None
    return wave


def _take(wave: list[tuple[str, Candidate]], progress: dict[str, _Progress], results: dict[str, FetchResult]) -> None:
    """Give each sub-question its successful pages from this wave, in wave order."""
    for sq_id, c in wave:
        page = results[c.key]
        p = progress[sq_id]
        if not page.ok or not page.text:
            continue
        final = url_key(page.final_url or page.url)
        if final in p.keys:  # another URL of a page this sub-question already has
            continue
        p.pages.append(page)
        p.keys.update({c.key, final})
