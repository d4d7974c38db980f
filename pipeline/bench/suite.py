"""A benchmark suite file (benchmarks/suites/<name>.json): questions over a frozen web, and what the grader checks."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator

# A corpus name: a folder of benchmarks/corpora, or one level below it ("failure-set/conflict"). Each segment starts
# with a letter, digit, "_" or "-", so "." and ".." (and hidden folders) never match, and no path leaves the folder.
_SEGMENT = r"[A-Za-z0-9_-][A-Za-z0-9_.-]*"
CORPUS_NAME = rf"^{_SEGMENT}(?:/{_SEGMENT})?$"

Split = Literal["dev", "test"]
QuestionKind = Literal["single_page", "two_page", "unanswerable", "conflict", "premise", "proxy", "calculation",
                       "many_parts", "outage", "paywall", "injection"]
LIVE = "live"
MANIFEST = "manifest.jsonl"  # a frozen web's list of saved pages (pipeline/web/corpus.py)


def _as_group(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


# One required answer term: a string, or a list of alternatives of which any one will do (["47", "48"]).
TermGroup = Annotated[list[Annotated[str, Field(min_length=1)]], BeforeValidator(_as_group), Field(min_length=1)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SuiteQuestion(_Strict):
    """One question and what a correct run shows; an expectation left at its default is not graded."""

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    split: Split = Field(description=(
        "dev: may be used to tune the selector; test: held out, written and committed before any tuning on it "
        "(docs/BENCHMARK.md)."))
    question: str = Field(min_length=3)
    kind: QuestionKind
    gold_pages: list[str] = Field(default_factory=list, description=(
        "URLs of the pages that answer it (doc:PATH for a file of a documents corpus)."))
    answer_terms: list[TermGroup] = Field(
        default_factory=list, description="Every group must be quoted by a cited finding (any one of its strings).")
    answer_page: int | None = Field(None, ge=1, description=(
        "The page of a document (a PDF of a documents corpus) the answer is on: a cited finding that quotes an "
        "answer term must record that page, and its quote must be on it."))
    expect_gap: bool = Field(False, description="Unanswerable: a gap is named and no figure is stated.")
    expect_nothing_stated: bool = Field(False, description=(
        "Negative rejection: besides the gap, the report cites no finding at all (the pages are near misses)."))
    expect_conflict: list[str] = Field(default_factory=list,
                                       description="The values on each side of a conflict the report must show.")
    wrong_answers: list[TermGroup] = Field(default_factory=list, description=(
        "Values a misleading source states: a cited quote carrying one must sit in a reported conflict."))
    expect_premise_check: bool = False
    expect_proxy: bool = False
    expect_calculation: bool = False
    max_sub_questions: int | None = Field(None, ge=1, description="Overrides the suite's cap.")
    corpus: str | None = Field(None, pattern=CORPUS_NAME, description=(
        "Overrides the suite's corpus (a folder under benchmarks/corpora, one level deep at most, or \"live\")."))
    note: str = ""

    @field_validator("gold_pages")
    @classmethod
    def _urls(cls, pages: list[str]) -> list[str]:
        for url in pages:
            if not url.lower().startswith(("http://", "https://", "doc:")):
                raise ValueError(f"not an http(s) URL or a doc: identifier: {url!r}")
        return pages

    @model_validator(mode="after")
    def _consistent(self) -> SuiteQuestion:
        if self.kind == "unanswerable" and not self.expect_gap:
            raise ValueError("an unanswerable question must set expect_gap")
        if self.expect_gap and self.answer_terms:
            raise ValueError("a question that expects a gap cannot have answer_terms")
        if self.kind == "conflict" and len(self.expect_conflict) < 2:
            raise ValueError("a conflict question must give at least two values in expect_conflict")
        if self.answer_page is not None and not self.answer_terms:
            raise ValueError("answer_page needs answer_terms: the page is checked on the findings that quote them")
        if self.expect_nothing_stated and not self.expect_gap:
            raise ValueError("expect_nothing_stated needs expect_gap: the report names the gap instead")
        return self


class Suite(_Strict):
    """A suite: its questions run against `corpus` (a folder under benchmarks/corpora: saved pages with a manifest,
    or any folder of documents; or "live")."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    version: str = Field(min_length=1)
    corpus: str = Field(min_length=1, pattern=CORPUS_NAME)
    description: str = ""
    max_sub_questions: int | None = Field(4, ge=1, description="The cap for every question that sets none.")
    questions: list[SuiteQuestion] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_ids(self) -> Suite:
        seen: set[str] = set()
        for i, q in enumerate(self.questions):
            if q.id in seen:
                raise ValueError(f"question #{i + 1} repeats the id {q.id!r}; question ids must be unique")
            seen.add(q.id)
        return self

    def cap(self, question: SuiteQuestion) -> int | None:
        """The most sub-questions `question` may be split into, or None when uncapped."""
        return question.max_sub_questions if question.max_sub_questions is not None else self.max_sub_questions

    def corpus_of(self, question: SuiteQuestion | None = None) -> str:
        """The corpus `question` runs against: its own when it names one, else the suite's."""
        return question.corpus if question is not None and question.corpus is not None else self.corpus

    def is_documents(self, corpora: Path, question: SuiteQuestion | None = None) -> bool:
        """Whether the corpus is a folder of documents (any files, read as `run --docs` reads them), not saved pages."""
        folder = self.corpus_dir(corpora, question)
        return folder is not None and folder.is_dir() and not (folder / MANIFEST).is_file()

    def corpus_dir(self, corpora: Path, question: SuiteQuestion | None = None) -> Path | None:
        """The corpus folder under `corpora` (of `question` when given), or None for a live one."""
        name = self.corpus_of(question)
        if name == LIVE:
            return None
        folder = corpora / name
        if not folder.resolve().is_relative_to(corpora.resolve()):  # a symlink out of the corpora folder
            raise SuiteError(f"the corpus {name!r} is not a folder inside {corpora}")
        return folder


class SuiteError(ValueError):
    """A suite file that cannot be used; the message names the file, the question and the field."""


def load_suite(path: str | Path) -> Suite:
    """The validated suite in `path`; SuiteError naming the file, question (id and number) and field otherwise."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise SuiteError(f"{path}: cannot read the suite file ({e.strerror or e})") from e
    except json.JSONDecodeError as e:
        raise SuiteError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from e
    try:
        return Suite.model_validate(raw)
    except ValidationError as e:
        raise SuiteError(f"{path}: " + "; ".join(_describe(err, raw) for err in e.errors())) from e


def _describe(err: Any, raw: Any) -> str:
    """One schema error as 'question "q7" (#7), field "kind": <message>'."""
    loc = list(err["loc"])
    msg = str(err["msg"]).removeprefix("Value error, ")
    where = ""
    if len(loc) >= 2 and loc[0] == "questions" and isinstance(loc[1], int):
        index = loc[1]
        item = raw["questions"][index] if isinstance(raw, dict) and isinstance(raw.get("questions"), list) else None
        qid = item.get("id") if isinstance(item, dict) else None
        where = f"question {qid!r} (#{index + 1})" if isinstance(qid, str) else f"question #{index + 1}"
        loc = loc[2:]
    field = ".".join(str(p) for p in loc)
    parts = [p for p in (where, f"field {field!r}" if field else "") if p]
    return f"{', '.join(parts)}: {msg}" if parts else msg
