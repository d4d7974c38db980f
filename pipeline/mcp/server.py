"""The MCP server (`python -m pipeline mcp`): Verbatim's research, guarded fetch, search and run store as MCP tools
over stdio, on the official `mcp` SDK (MCPServer, the SDK's typed-tool server).

Tools: research(question, mode, budget, docs), fetch_page(url), search(query, n), list_runs(limit), get_run(run_id),
list_documents(folder).

What a caller can and cannot do:
- Settings (keys, the search provider, the fetch policy, RESEARCH_DB) are read from the server's environment once,
  when it starts; no tool takes a setting. A run over documents names one of the folders the server was configured
  with (RESEARCH_MCP_DOCS, pipeline/mcp/docs.py); a caller never passes a path.
- A research run's limits come from the budget preset the caller names, each capped by the server (limits.py); a
  caller cannot send limits.
- The only way to the web is pipeline/web's guarded fetcher (fetch_page and the runs' fetches) and the configured
  search provider; a refused URL (file://, a private or metadata address) is a tool error carrying the fetch's
  error_kind and reason.
- Bad arguments (an overlong question, an unknown mode or preset, a malformed or unknown run id) are tool errors
  (isError results with a message); the server goes on serving.
- The server's secrets (model and search keys, a database password) are scrubbed from every result, error and
  progress line.

Research runs are recorded in the run store like `python -m pipeline run`'s (same research(), same open_store), so
list_runs, get_run and the CLI's runs/replay/resume/export see them.
"""
from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal, TypeVar

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from pipeline.config import ConfigError, Settings
from pipeline.core.budget import Budget
from pipeline.core.events import EventSink, redact
from pipeline.core.schema import (
    BudgetLimits,
    Confidence,
    Conflict,
    FetchResult,
    Location,
    Mode,
    Problem,
    RunOptions,
    RunResult,
    RunStatus,
    SearchResult,
    Support,
    Usage,
)
from pipeline.mcp.docs import DocumentList, choose, list_documents, parse_folders
from pipeline.mcp.limits import (
    DEFAULT_PRESET,
    MAX_LISTED_RUNS,
    MAX_PAGE_CHARS,
    MAX_QUESTION_CHARS,
    MAX_SEARCH_RESULTS,
    McpSettings,
    PresetName,
    Refused,
    checked_query,
    checked_question,
    checked_run_id,
    describe_presets,
    limits_for,
)
from pipeline.mcp.progress import ProgressBridge
from pipeline.models.base import LLMError
from pipeline.models.factory import model_client
from pipeline.research import preflight
from pipeline.research.context import RunContext
from pipeline.research.orchestrator import RunNotRecorded, build_context, new_run_id, research
from pipeline.store import open_store, store_exists
from pipeline.store.base import RunListing, StoreError
from pipeline.store.sql import settings_secrets
from pipeline.web.fetch import Fetcher, WebPages
from pipeline.web.guard import MAX_URL_CHARS
from pipeline.web.search.service import SearchFailed, make_provider, unique_results

log = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)
SHORTEST_SCRUBBED = 6  # a "secret" shorter than this would garble every text it is scrubbed from
INSTRUCTIONS = (
    "Verbatim researches a question on the web and answers with a short report in which every claim cites a "
    "finding, and every finding is a verbatim quote that code located in a page the run fetched. Call research "
    "for a question (mode extractive needs no model and costs nothing; fixed and tools use the server's model), "
    "with docs set to research one of the server's documents folders (list_documents shows what each holds), "
    "fetch_page for one page through the guarded fetcher, search for one web search, list_runs and get_run for "
    "recorded runs. Limits and settings are the server's; a caller picks only a budget preset and a folder name.")


# -- results -----------------------------------------------------------------------------------------------------------

class QuotedFinding(BaseModel):
    """A finding: the claim, the quote that code located in its source's text, and where that source is."""

    id: str
    claim: str
    quote: str
    source: str = Field(description="The id of the source (see sources) the quote was found in.")
    url: str
    title: str | None = None
    published: str | None = None
    sub_question: str | None = None
    confidence: Confidence
    support: Support
    location: Location | None = Field(None, description=(
        "Where the quote sits in a document: its page (PDF) and heading path; null for a web page."))


class SourceRef(BaseModel):
    """A page the run fetched, or a file of a documents folder (kind "document", with its path in the folder)."""

    id: str
    url: str
    final_url: str
    title: str | None = None
    published: str | None = None
    fetched_at: str
    kind: Literal["web", "document"] = "web"
    path: str | None = None


class Answer(BaseModel):
    """A research run's outcome: the report (Markdown, citing findings as [F#]) and its findings with their quotes."""

    run_id: str
    question: str
    mode: Mode
    status: RunStatus = Field(description="complete; partial (problems lists what is wrong); or failed.")
    report: str = Field(description="The report in Markdown; each [F#] cites the finding with that id.")
    findings: list[QuotedFinding]
    sources: list[SourceRef]
    gaps: list[str]
    conflicts: list[Conflict]
    problems: list[Problem]
    usage: Usage
    limits: BudgetLimits = Field(description="The limits the run had (its preset, capped by the server).")


class FetchedPage(FetchResult):
    """One guarded fetch and extraction (the `fetch --json` fields); `text` is cut at MAX_PAGE_CHARS characters."""

    text_chars: int = Field(0, description="The length of the page's whole extracted text.")
    text_cut: bool = Field(False, description="True when text holds only the first part of the page's text.")


class SearchResults(BaseModel):
    query: str
    provider: str
    results: list[SearchResult]


class RunList(BaseModel):
    """Recorded runs, newest first."""

    runs: list[RunListing]


class RunDetail(BaseModel):
    """A recorded run: its row, and its answer once it has finished."""

    id: str
    question: str
    mode: str
    status: str = Field(description="running, interrupted (its process is gone; resumable), complete, partial or "
                                    "failed.")
    started: str
    finished: str | None = None
    limits: BudgetLimits
    cost_usd: float
    replay_of: str | None = None
    answer: Answer | None = None


# -- the tools ---------------------------------------------------------------------------------------------------------

class _Busy(Exception):
    """Every research slot of this server is taken."""


class _Cancel:
    """Stops a run from outside its thread: its budget, once it exists, refuses every further call."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._budget: Budget | None = None
        self.requested = False

    def bind(self, budget: Budget) -> None:
        with self._lock:
            self._budget = budget
            if self.requested:
                budget.cancel()

    def cancel(self) -> None:
        with self._lock:
            self.requested = True
            if self._budget is not None:
                self._budget.cancel()


class Tools:
    """The tools of one server, on the settings it started with."""

    def __init__(self, settings: Settings, limits: McpSettings) -> None:
        self.settings, self.limits = settings, limits
        self.cap = limits.cap()
        self.folders = parse_folders(limits.docs)  # ConfigError (the server does not start) on a bad entry
        self._secrets = tuple(s for s in settings_secrets(settings) if len(s) >= SHORTEST_SCRUBBED)
        self._lock = threading.Lock()
        self._running = 0
        # fetch_page's loader: the guarded web, its TLS context built once; each call gets a fresh Fetcher (no cache
        # or remembered failure carries over from one call to the next).
        self._pages = WebPages(settings)
        # fetch_page and search share the research slots' count: a caller sending many at once waits its turn
        # instead of starting dozens of PDF workers. The model's server-side search spends from one budget for the
        # server's lifetime (the small preset under the cap), so repeated searches cannot spend without bound.
        self._io = threading.BoundedSemaphore(limits.max_concurrent)
        self._search_budget = Budget(limits_for("small", "fixed", self.cap), settings.price)

    # scrubbing

    def scrub(self, text: str) -> str:
        """`text` without the server's secrets or anything shaped like a key."""
        return str(redact(text, self._secrets))

    def clean(self, model: M) -> M:
        """A copy of `model` with every string scrubbed."""
        return type(model).model_validate(redact(model.model_dump(mode="json"), self._secrets))

    def error(self, message: str) -> ToolError:
        return ToolError(self.scrub(message))

    # research

    async def research(
        self,
        ctx: Context,
        question: Annotated[str, Field(description="The question to research, in plain words.",
                                       json_schema_extra={"maxLength": MAX_QUESTION_CHARS})],
        mode: Annotated[Mode, Field(description=(
            "fixed: code runs the planned searches, a model reads the pages and writes (predictable cost); tools: "
            "a model worker per sub-question searches and reads (more thorough); extractive: no model at all, "
            "sentences chosen by code, no key needed, $0."))] = "fixed",
        budget: Annotated[PresetName, Field(description=(
            "The budget preset; the server caps each one (this tool's description lists them as capped)."))]
        = DEFAULT_PRESET,
        docs: Annotated[str | None, Field(description=(
            "The name of one of this server's documents folders to research (list_documents shows them), alone, "
            "or beside the web when the server has a web search provider. Not a path."))] = None,
    ) -> Answer:
        try:
            text = checked_question(question)
            settings = self.settings if docs is None else self.settings.model_copy(
                update={"docs_dir": str(choose(self.folders, docs))})
        except Refused as e:
            raise self.error(str(e)) from None
        await anyio.to_thread.run_sync(self._preflight, mode, settings)
        limits = limits_for(budget, mode, self.cap)
        options = RunOptions(mode=mode, limits=limits)
        run_id = new_run_id()
        bridge = ProgressBridge(ctx.report_progress, scrub=self.scrub)
        stop = _Cancel()
        result: RunResult | None = None
        failure: ToolError | None = None
        started = (f"run {run_id} started: {mode} mode, {budget} budget (up to {limits.searches} searches, "
                   f"{limits.fetches} fetches, ${limits.cost_usd:.2f})")
        # Nothing but a cancellation may leave this block by raising: the bridge's task group would wrap the error.
        async with bridge.running():
            try:
                result = await anyio.to_thread.run_sync(
                    functools.partial(self._run, settings, text, options, run_id, bridge, stop, started),
                    abandon_on_cancel=True)
            except anyio.get_cancelled_exc_class():
                stop.cancel()  # the client gave up: the run winds down in its thread and is recorded as cancelled
                log.info("run %s: the request was cancelled; stopping the run", run_id)
                raise
            except _Busy:
                failure = self.error(f"this server already runs {self.limits.max_concurrent} research run"
                                     f"{'s' if self.limits.max_concurrent != 1 else ''} at a time (its limit); try "
                                     "again when one has finished")
            except ToolError as e:
                failure = e
            else:
                await bridge.say(f"run {run_id} {result.status}: {len(result.findings)} findings, "
                                 f"{len(result.sources)} sources, ${result.usage.cost_usd:.4f}")
        if failure is not None or result is None:
            raise failure or self.error("the run ended without a result")
        return self.clean(answer_of(result))

    def _preflight(self, mode: Mode, settings: Settings) -> None:
        """The CLI's check before a run is started: the mode's model key, the search provider's setting, the corpus,
        the documents folder."""
        try:
            preflight.require_run_access(settings, mode)
        except preflight.NoModelAccess as e:
            raise self.error(f"{e} Or call research with mode \"extractive\", which uses no model and needs no "
                             "key.") from None
        except ConfigError as e:
            raise self.error(str(e)) from None

    @contextmanager
    def _slot(self) -> Iterator[None]:
        with self._lock:
            if self._running >= self.limits.max_concurrent:
                raise _Busy
            self._running += 1
        try:
            yield
        finally:
            with self._lock:
                self._running -= 1

    def _run(self, settings: Settings, question: str, options: RunOptions, run_id: str, bridge: ProgressBridge,
             stop: _Cancel, started: str) -> RunResult:
        """One run, recorded in the run store as `python -m pipeline run` records it (in a worker thread); _Busy when
        every research slot is taken. `started` is the first progress line, sent once the run has its slot."""
        def context(settings: Settings, opts: RunOptions, sink: EventSink, **kw: Any) -> RunContext:
            ctx = build_context(settings, opts, sink, **kw)
            stop.bind(ctx.budget)
            return ctx

        with self._slot():
            bridge.post(started)
            log.info("run %s started (%s mode)", run_id, options.mode)
            try:
                with open_store(self.settings) as store:
                    try:
                        result = research(question, settings, options=options, run_id=run_id, events=bridge,
                                          store=store, context=context)
                    except RunNotRecorded as e:  # what the run had, its problems saying how to resume it
                        result = e.result
            except StoreError as e:
                raise self.error(f"the run store failed: {e}") from None
            except ConfigError as e:
                raise self.error(str(e)) from None
            log.info("run %s %s; $%.4f", run_id, result.status, result.usage.cost_usd)
            return result

    # fetch and search

    def fetch_page(
        self,
        url: Annotated[str, Field(description="An http(s) URL of a public page.",
                                  json_schema_extra={"maxLength": MAX_URL_CHARS})],
    ) -> Annotated[CallToolResult, FetchedPage]:
        if len(url) > MAX_URL_CHARS:
            raise self.error(f"the URL is {len(url):,} characters long; the limit is {MAX_URL_CHARS:,}")
        with self._io:
            result = Fetcher(self.settings, loader=self._pages).fetch(url.strip())
        if not result.ok:
            failed = self.clean(result)
            return CallToolResult(is_error=True, structured_content=failed.model_dump(mode="json"), content=[
                TextContent(type="text", text=f"fetch_page failed ({failed.error_kind}): {failed.error}")])
        text = result.text or ""
        page = self.clean(FetchedPage(**result.model_dump(exclude={"text"}), text=text[:MAX_PAGE_CHARS],
                                      text_chars=len(text), text_cut=len(text) > MAX_PAGE_CHARS))
        return CallToolResult(structured_content=page.model_dump(mode="json"),
                              content=[TextContent(type="text", text=page.model_dump_json(indent=2))])

    def search(
        self,
        query: Annotated[str, Field(description="What to search the web for.")],
        n: Annotated[int, Field(ge=1, le=MAX_SEARCH_RESULTS, description="How many results at most.")] = 10,
    ) -> SearchResults:
        try:
            text = checked_query(query)
            provider = make_provider(self.settings, server_web_search=self._model_search, model_errors=(LLMError,))
            with self._io:
                results = unique_results(provider.search(text, n=n))[:n]
        except (Refused, SearchFailed, ConfigError) as e:
            raise self.error(str(e)) from None
        return self.clean(SearchResults(query=text, provider=self.settings.search_provider, results=results))

    def list_documents(
        self,
        folder: Annotated[str, Field(description="The name of one of this server's documents folders.")],
    ) -> DocumentList:
        try:
            root = choose(self.folders, folder)
            with self._io:
                return self.clean(list_documents(folder, root, self.settings))
        except (Refused, ConfigError) as e:
            raise self.error(str(e)) from None

    def _model_search(self, query: str, n: int, recency_days: int | None) -> list[dict[str, Any]]:
        """The model's server-side search (RESEARCH_SEARCH_PROVIDER=anthropic), on the server's one search budget."""
        return model_client(self.settings, self._search_budget).server_web_search(query, n, recency_days)

    # the run store

    def list_runs(
        self,
        limit: Annotated[int, Field(ge=1, le=MAX_LISTED_RUNS, description="Only the newest runs, at most this many.")]
        = 20,
    ) -> RunList:
        try:
            if not store_exists(self.settings):
                return RunList(runs=[])
            with open_store(self.settings, must_exist=True) as store:
                rows = store.runs(limit=limit)
        except StoreError as e:
            raise self.error(f"the run store failed: {e}") from None
        return self.clean(RunList(runs=rows))

    def get_run(self, run_id: Annotated[str, Field(description="A run id, as research and list_runs give it.")],
                ) -> RunDetail:
        unknown = f"there is no run {run_id.strip()[:64]!r}; list_runs gives the ids of the recorded runs"
        try:
            rid = checked_run_id(run_id)
            if not store_exists(self.settings):
                raise self.error(unknown)
            with open_store(self.settings, must_exist=True) as store:
                row = store.run(rid)
                result = store.result(rid) if row is not None else None
        except Refused as e:
            raise self.error(str(e)) from None
        except StoreError as e:
            raise self.error(f"the run store failed: {e}") from None
        if row is None:
            raise self.error(unknown)
        return self.clean(RunDetail(
            id=row.id, question=row.question, mode=row.mode, status=row.shown_status, started=row.started,
            finished=row.finished, limits=row.limits, cost_usd=row.cost_usd, replay_of=row.replay_of,
            answer=answer_of(result) if result is not None else None))


def answer_of(result: RunResult) -> Answer:
    """The Answer a client gets for a RunResult: each finding with its quote and its source's URL and title."""
    sources = {s.id: s for s in result.sources}
    findings = []
    for f in result.findings:
        src = sources.get(f.source)
        findings.append(QuotedFinding(
            id=f.id, claim=f.claim, quote=f.quote, source=f.source, url=src.final_url if src else "",
            title=src.title if src else None, published=src.published if src else None, sub_question=f.sub_question,
            confidence=f.confidence, support=f.support, location=f.location))
    return Answer(
        run_id=result.run_id, question=result.question, mode=result.mode, status=result.status,
        report=result.report.markdown, findings=findings,
        sources=[SourceRef(id=s.id, url=s.url, final_url=s.final_url, title=s.title, published=s.published,
                           fetched_at=s.fetched_at, kind=s.kind or "web", path=s.path) for s in result.sources],
        gaps=result.report.gaps, conflicts=result.report.conflicts, problems=result.problems, usage=result.usage,
        limits=result.budget.limits)


def build_server(settings: Settings, limits: McpSettings) -> MCPServer:
    """The MCP server with its six tools, on `settings` and `limits` (fixed for the server's life)."""
    tools = Tools(settings, limits)
    server: MCPServer = MCPServer("verbatim", title="Verbatim research", instructions=INSTRUCTIONS,
                                  log_level="WARNING")
    reading = ToolAnnotations(read_only_hint=True, open_world_hint=True)
    stored = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    add: Callable[..., None] = server.add_tool
    add(tools.research, name="research", annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False,
                                                                     open_world_hint=True), description=(
        "Research a question on the web and return a report whose every claim cites a finding, each finding a "
        "verbatim quote located in a page this run fetched, with its source; plus gaps, conflicts, problems, usage "
        "and the run id (the run is recorded; get_run reads it again). Sends progress notifications when the "
        "request carries a progress token. With docs, it researches one of the server's documents folders by name "
        "(a quote from a file cites its path, and its page or heading). Budget presets on this server: "
        + describe_presets(tools.cap) + "."))
    add(tools.fetch_page, name="fetch_page", annotations=reading, description=(
        "Fetch one page through the guarded fetcher (http and https to public addresses only; redirects re-checked; "
        "size and time capped) and extract its title, date and text. A refused or failed fetch is a tool error "
        "naming its error_kind (blocked, too_large, timeout, http_status, unsupported_type, network)."))
    add(tools.search, name="search", annotations=reading, description=(
        "One web search through the server's configured provider: titles, URLs, snippets and dates."))
    add(tools.list_runs, name="list_runs", annotations=stored, description=(
        "The recorded research runs, newest first: id, date, question, mode, status and cost."))
    add(tools.list_documents, name="list_documents", annotations=stored, description=(
        "What one of the server's documents folders holds, by name: each indexed file (path, kind, title, date, "
        "pages), each file that could not be read with its reason. Folders on this server: "
        + (", ".join(sorted(tools.folders)) or "none") + "."))
    add(tools.get_run, name="get_run", annotations=stored, description=(
        "One recorded run by id: its status and limits, and once finished its report, findings with quotes and "
        "sources."))
    return server
