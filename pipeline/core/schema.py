"""Pydantic models for the data that flows between steps; RunResult is the JSON contract."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

ErrorKind = Literal[
    "blocked", "too_large", "timeout", "http_status", "unsupported_type", "network", "budget", "repeat_failure"
]
Confidence = Literal["high", "medium", "low"]
Support = Literal["supported", "partial", "unsupported", "unknown"]
RunStatus = Literal["complete", "partial", "failed"]
Mode = Literal["fixed", "tools", "extractive"]


class ModelPrice(BaseModel):
    """US dollars per million tokens of each kind."""

    input: float
    output: float
    cache_write: float
    cache_read: float


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _unset(value: object) -> bool:
    """Fields added after RunResults were first saved are written only when set, so old files read back unchanged."""
    return value is None or value == [] or value == 0 or value is False


class PageMark(_Model):
    """Where a page of a document begins in its extracted text (pages numbered from 1, in the file's order)."""

    page: int = Field(ge=1)
    start: int = Field(ge=0)
    ocr: bool = Field(False, exclude_if=_unset)  # the page is a scanned image whose text OCR read


class HeadingMark(_Model):
    """Where a heading's section begins in a document's extracted text, and its path ("Results > Table 2")."""

    start: int = Field(ge=0)
    path: str


class TextLayout(_Model):
    """Page starts and heading marks of an extracted text, in order of their offsets; empty for a web page."""

    pages: list[PageMark] = Field(default_factory=list)
    headings: list[HeadingMark] = Field(default_factory=list)


class DocumentInfo(_Model):
    """What a read of a file from the user's documents folder adds to a FetchResult."""

    path: str  # relative to the folder, with "/" separators
    layout: TextLayout = Field(default_factory=TextLayout)
    published_from: Literal["metadata", "mtime"] | None = None  # where `published` came from


class Location(_Model):
    """Where a finding's quote sits in a document: its page (and offsets within that page) and its heading path."""

    page: int | None = None
    page_start: int | None = None
    page_end: int | None = None
    heading: str | None = None
    ocr: bool = Field(False, exclude_if=_unset)  # the quote is OCR text of a scanned page


class SearchResult(_Model):
    """One hit from a search provider: snippets only, never page text."""

    title: str
    url: str
    snippet: str = ""
    published: str | None = None


class FetchResult(_Model):
    """One guarded fetch and extraction; the `fetch --json` contract. `text` is what quotes are checked against."""

    ok: bool
    error_kind: ErrorKind | None = None
    error: str | None = None
    url: str
    final_url: str | None = None
    status: int | None = None
    content_type: str | None = None
    title: str | None = None
    text: str | None = None
    published: str | None = None
    truncated: bool = False
    bytes: int = 0
    document: DocumentInfo | None = Field(None, exclude_if=_unset)  # set when the page is a file of the user's


class Source(_Model):
    """A page fetched in this run. Its full text lives in the notebook and the run store, not here."""

    id: str
    url: str
    final_url: str
    title: str | None = None
    published: str | None = None
    fetched_at: str
    sha256: str
    chars: int
    kind: Literal["document"] | None = Field(None, exclude_if=_unset)  # unset: a web page
    path: str | None = Field(None, exclude_if=_unset)  # a document's path, relative to its folder
    published_from: Literal["metadata", "mtime"] | None = Field(None, exclude_if=_unset)


class Finding(_Model):
    """A claim backed by a quote that code located at text[start:end] of the source's stored text."""

    id: str
    sub_question: str | None = None
    source: str
    claim: str
    quote: str
    start: int
    end: int
    confidence: Confidence = "medium"
    support: Support = "unknown"
    confirmed_with_find_in_page: bool = False
    # True when code chose the sentence in place of a model that failed (the analyst's fallback); an extractive run
    # selects every finding by code, which its mode already says. Written only when true, so every finding recorded
    # before the field existed reads back unchanged.
    selected_by_code: bool = Field(False, exclude_if=lambda v: not v)
    location: Location | None = Field(None, exclude_if=_unset)  # a document's page and heading of the quote


class RejectedFinding(_Model):
    """A proposed finding the notebook refused, with the reason (kept for the record, never reported as fact)."""

    sub_question: str | None = None
    source: str
    claim: str
    quote: str
    reason: str


class SubQuestion(_Model):
    id: str
    question: str
    success_criterion: str = ""
    proxy: str | None = Field(None, description="The checkable proxy chosen for a vague term, if any.")
    queries: list[str] = Field(default_factory=list)
    is_premise_check: bool = False


class Plan(_Model):
    sub_questions: list[SubQuestion] = Field(default_factory=list)
    not_researched: list[str] = Field(default_factory=list, description="Sub-questions cut from the plan.")
    fallback: bool = Field(False, description="True when the plan fell back to the question itself.")


class Conflict(_Model):
    sub_question: str | None = None
    description: str
    findings: list[str] = Field(default_factory=list)


class Calculation(_Model):
    """A `calculate` result the writer may cite as [C#]; the reviewer checks its figures like quotes."""

    id: str
    expression: str
    result: str
    sub_question: str | None = None


class RunStats(_Model):
    """Quality signals: when the rejected share drifts, quality has drifted."""

    findings_recorded: int = 0
    confirmed_with_find_in_page: int = 0
    quotes_rejected: int = 0
    repeated_calls_refused: int = 0
    review_rounds: int = 0


class Report(_Model):
    markdown: str = ""
    gaps: list[str] = Field(default_factory=list)
    conflicts: list[Conflict] = Field(default_factory=list)


class Problem(_Model):
    """Something a check found wrong with the run or the report, shown to the reader, never hidden."""

    kind: str
    message: str
    step: str | None = None
    sentence: str | None = None


class Usage(_Model):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cost_usd: float = 0.0
    model_calls: int = 0
    searches: int = 0
    fetches: int = 0
    documents: int = Field(0, exclude_if=_unset)  # reads of files from the user's documents folder


DOCUMENT_READS = 40  # the default limit on document reads; written only when another is set, as before the field


class BudgetLimits(_Model):
    """Hard ceilings for one run; `reserve` is the share of each held back from research for later steps."""

    searches: int = 30
    fetches: int = 40
    documents: int = Field(DOCUMENT_READS, ge=0, exclude_if=lambda v: v == DOCUMENT_READS)
    model_calls: int = 80
    input_tokens: int = 1_500_000
    output_tokens: int = 150_000
    cost_usd: float = 2.00
    reserve: float = Field(0.3, ge=0.0, lt=1.0)


class BudgetState(_Model):
    limits: BudgetLimits = Field(default_factory=BudgetLimits)
    used: Usage = Field(default_factory=Usage)


class RunOptions(_Model):
    """Per-run knobs (the CLI and the app set them); defaults are the production choices."""

    mode: Mode = "fixed"
    plan_candidates: int = Field(1, ge=1, le=5)
    max_sub_questions: int = Field(4, ge=1, le=4)
    results_per_query: int = Field(5, ge=1, le=20)
    pages_per_sub_question: int = Field(3, ge=1, le=10)
    worker_max_steps: int = Field(12, ge=2, le=50)
    review_rounds: int = Field(2, ge=0, le=5)
    limits: BudgetLimits = Field(default_factory=BudgetLimits)
    # Who makes each tools worker's first search: "code" runs the plan's first suggested query and puts its results
    # in the worker's first message (one model turn fewer), "model" leaves it to the worker. Unset: a new run takes
    # "code" (research() sets it); a run recorded before the choice existed replays as "model", as it ran.
    first_search: Literal["code", "model"] | None = None
    # Whether the judges rate several findings or sentences per call (fewer, shorter-prompted requests). Unset: a new
    # run takes True (research() sets it); a run recorded before the choice existed replays as False, as it ran.
    batch_calls: bool | None = None
    # The documents folder the run researched (RESEARCH_DOCS_DIR or `run --docs`), recorded so a resume reads it again.
    docs: str | None = Field(None, exclude_if=_unset)


class BenchInfo(_Model):
    """What produced a benchmark run: the suite and question, the corpus, the code, the prompts, the models, when."""

    suite: str
    suite_version: str
    question_id: str
    repeat: int = Field(1, ge=1)
    corpus: str
    code_version: str
    git_commit: str | None = None
    prompt_hash: str
    models: dict[str, str] = Field(default_factory=dict)
    date: str  # ISO 8601, UTC


class RunResult(_Model):
    """Everything one run produced; `model_dump_json()` is the RunResult JSON contract (README: Command line)."""

    run_id: str
    question: str
    mode: Mode
    models: dict[str, str] = Field(default_factory=dict)
    status: RunStatus
    plan: Plan | None = None
    sources: list[Source] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    rejected: list[RejectedFinding] = Field(default_factory=list)
    calculations: list[Calculation] = Field(default_factory=list)
    report: Report = Field(default_factory=Report)
    stats: RunStats = Field(default_factory=RunStats)
    problems: list[Problem] = Field(default_factory=list)
    budget: BudgetState = Field(default_factory=BudgetState)
    usage: Usage = Field(default_factory=Usage)
    timings: dict[str, float] = Field(default_factory=dict)
    bench: BenchInfo | None = None  # set on runs made by `python -m pipeline bench`
